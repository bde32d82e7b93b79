"""A subscription's match regex, matched in time linear in the value's length.

The values a pattern is matched against come from clients: a client id or software name
is whatever the client sends (a client id up to 32,767 characters). With a backtracking
engine (Java's ``java.util.regex`` in Kafka, Python's ``re``), an operator's careless
pattern such as ``(a+)+b`` lets one client id of a few dozen characters run the match for
minutes, and a collector answers every client from one event loop. The collector
therefore compiles patterns with RE2 (``google-re2``), which never backtracks, and bounds
a compiled pattern's memory (RE2's ``max_mem``, 8 MiB by default).

| construct | java.util.regex (Kafka) | here (RE2) |
|---|---|---|
| classes, quantifiers, groups, alternation, anchors, ``(?i)`` | yes | yes |
| ``\\p{L}``, ``\\pL``, ``\\Q...\\E``, ``\\z``, ``(?<name>...)`` | yes | yes |
| ``\\w``, ``\\d`` | ASCII | ASCII |
| Java's named classes such as ``\\p{Alpha}`` | yes | no: INVALID_CONFIG (``[[:alpha:]]``) |
| lookaround ``(?=`` ``(?!`` ``(?<=`` ``(?<!``, backreferences ``\\1`` | yes | no: INVALID_CONFIG |
| possessive ``a*+``, atomic groups ``(?>...)`` | yes | no: INVALID_CONFIG |

A match is a full match (Java's ``Matcher.matches()``). Results are cached per pattern
and value (client ids and software names repeat across instances), because a call into
the RE2 binding costs microseconds where ``re`` costs a fraction of one.
"""

from __future__ import annotations

import functools
from typing import Final

import re2

__all__ = ["MatchPattern", "MatchPatternError"]

# Distinct values whose result each pattern remembers.
_RESULT_CACHE_SIZE: Final = 4096


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = (
        False  # a refused pattern is reported as INVALID_CONFIG, not logged
    )
    options.never_capture = True  # only "does it match" is asked
    return options


_OPTIONS: Final = _options()


class MatchPatternError(ValueError):
    """RE2 cannot compile the pattern (bad syntax, a construct RE2 lacks, or too large)."""


class MatchPattern:
    """One compiled match regex. ``pattern`` is the regex as configured."""

    __slots__ = ("_regexp", "fullmatches", "pattern")

    def __init__(self, pattern: str) -> None:
        try:
            self._regexp = re2.compile(pattern, options=_OPTIONS)
        except re2.error as exc:
            raise MatchPatternError(f"{pattern!r}: {_reason(exc)}") from None
        self.pattern = pattern
        self.fullmatches = functools.lru_cache(maxsize=_RESULT_CACHE_SIZE)(
            self._fullmatches
        )

    def _fullmatches(self, value: str) -> bool:
        """True if the whole of ``value`` matches."""
        try:
            return self._regexp.fullmatch(value) is not None
        except UnicodeEncodeError:  # a lone surrogate: no UTF-8 form, so no RE2 match
            return False

    def __repr__(self) -> str:
        return f"MatchPattern({self.pattern!r})"


def _reason(exc: Exception) -> str:
    reason = exc.args[0] if exc.args else exc
    return (
        reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
    )

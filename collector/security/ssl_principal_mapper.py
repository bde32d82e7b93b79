"""Kafka's ``ssl.principal.mapping.rules``: a client certificate's distinguished name -> the
principal name (``SslPrincipalMapper``, used by ``DefaultKafkaPrincipalBuilder``).

A rule list is comma separated (whitespace around a rule is ignored, empty rules too):

| rule                              | what it does                                               |
|-----------------------------------|------------------------------------------------------------|
| ``DEFAULT``                       | the distinguished name as it is                            |
| ``RULE:pattern/replacement/``     | when ``pattern`` matches the whole name: every match of it |
|                                   | replaced (``$1`` ... are its groups, Java's syntax)        |
| ``RULE:pattern/replacement/L``    | the same, then lower-cased                                 |
| ``RULE:pattern/replacement/U``    | the same, then upper-cased                                 |

``\\/`` inside a pattern or replacement is a literal slash. The first rule that applies wins;
when none does the name cannot be mapped and the connection is refused (Kafka fails the
authentication with "No rules apply to ..."). The default list is ``DEFAULT``.

The patterns are Java regular expressions; Python's ``re`` reads the common subset
(Java's named groups ``(?<name>...)`` are translated; ``\\p{...}`` classes are not read and
are refused when the rules are loaded). One stricter check than Kafka's: text its splitter
would skip silently (a rule followed by a newline instead of a comma) is an error here, as
is a replacement that refers to a group its pattern lacks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "DEFAULT_SSL_PRINCIPAL_MAPPING_RULES",
    "InvalidMappingRule",
    "NoMatchingRule",
    "SslPrincipalMapper",
]

DEFAULT_SSL_PRINCIPAL_MAPPING_RULES = "DEFAULT"

# Kafka's RULE_PATTERN and RULE_SPLITTER, unchanged: group 1 DEFAULT, group 2 the pattern,
# group 4 the replacement, group 6 the case flag, group 7 anything else (empty: ignored).
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_PARSER = re.compile(_RULE)
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_BACK_REFERENCE = re.compile(r"\$(\d+)")
_JAVA_NAMED_GROUP = re.compile(r"\(\?<(?=[A-Za-z])")


class InvalidMappingRule(ValueError):
    """A rule list cannot be read; the message quotes the rule."""


class NoMatchingRule(LookupError):
    """No rule applies to a distinguished name (Kafka's ``NoMatchingRule``)."""


# A compiled replacement: literal text, a group number, or a group name, in order.
_Part = str | int | tuple[str]


def _escape_literal_back_references(replacement: str, groups: int) -> str:
    """Kafka's ``escapeLiteralBackReferences`` (from Apache NiFi): ``$n`` naming no group is
    kept as literal text (``$123`` with 12 groups is ``$12`` then ``3``). Positions are
    taken from the original text while the escaped copy grows, as Kafka's loop does."""
    if groups == 0:
        return replacement
    value = replacement
    for match in _BACK_REFERENCE.finditer(replacement):
        number = match.group(1)
        if number.startswith("0"):
            continue
        index = int(number)
        while index > groups and index >= 10:
            index //= 10
        if index > groups:
            start = match.start(1)
            value = value[: start - 1] + "\\" + value[start - 1 :]
    return value


def _compile_replacement(
    replacement: str, groups: int, names: set[str]
) -> tuple[_Part, ...]:
    """Java's ``Matcher.appendReplacement`` syntax: ``\\x`` is x, ``$n`` the longest group
    number that exists, ``${name}`` a named group; anything else after ``$`` is an error."""
    parts: list[_Part] = []
    literal: list[str] = []
    i = 0
    while i < len(replacement):
        char = replacement[i]
        if char == "\\":
            i += 1
            if i == len(replacement):
                raise InvalidMappingRule(
                    f"character to be escaped is missing in {replacement!r}"
                )
            literal.append(replacement[i])
            i += 1
            continue
        if char != "$":
            literal.append(char)
            i += 1
            continue
        i += 1
        if i == len(replacement):
            raise InvalidMappingRule(
                f"group index is missing after $ in {replacement!r}"
            )
        if literal:
            parts.append("".join(literal))
            literal = []
        if replacement[i] == "{":
            end = replacement.find("}", i)
            name = replacement[i + 1 : end] if end > 0 else ""
            if end < 0 or name not in names:
                raise InvalidMappingRule(f"no group named {name!r} in {replacement!r}")
            parts.append((name,))
            i = end + 1
            continue
        if not replacement[i].isdigit():
            raise InvalidMappingRule(f"illegal group reference in {replacement!r}")
        number = int(replacement[i])
        if number > groups:
            raise InvalidMappingRule(f"no group {number} in {replacement!r}")
        i += 1
        while i < len(replacement) and replacement[i].isdigit():
            longer = number * 10 + int(replacement[i])
            if longer > groups:
                break
            number = longer
            i += 1
        parts.append(number)
    if literal:
        parts.append("".join(literal))
    return tuple(parts)


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    source: str = ""
    replacement: str = ""
    parts: tuple[_Part, ...] = ()
    case: str = ""  # "L", "U" or ""

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if self.pattern.fullmatch(name) is None:
            return None
        result = self._replace_all(self.pattern, name)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def _replace_all(self, pattern: re.Pattern[str], name: str) -> str:
        """Java's ``String.replaceAll``: every match of the pattern in the name, not only the
        whole; after an empty match the search moves one character on (``re.sub`` would try
        a longer match at the same place instead)."""
        out = []
        end = position = 0
        while position <= len(name):
            match = pattern.search(name, position)
            if match is None:
                break
            out.append(name[end : match.start()])
            out.append(self._substitute(match))
            end = match.end()
            position = end + 1 if match.start() == end else end
        out.append(name[end:])
        return "".join(out)

    def _substitute(self, match: re.Match[str]) -> str:
        out = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
            else:
                out.append(
                    match.group(part if isinstance(part, int) else part[0]) or ""
                )
        return "".join(out)

    def __str__(self) -> str:  # Kafka's Rule.toString()
        if self.pattern is None:
            return "DEFAULT"
        flag = f"/{self.case}" if self.case else ""
        return f"RULE:{self.source}/{self.replacement}{flag}"


def _split(rules: str) -> list[str]:
    text = rules.strip()
    out = []
    covered = 0
    for match in _RULE_SPLITTER.finditer(text):
        skipped = text[covered : match.start()]
        if skipped.strip():
            raise InvalidMappingRule(
                f"Invalid rule: `{skipped.strip()}` is not followed by a comma "
                "(rules are separated by commas)"
            )
        covered = max(covered, match.end())
        out.append(match.group(1))
    return out


def _parse(rule: str) -> _Rule | None:
    match = _RULE_PARSER.match(rule)
    if match is None:
        raise InvalidMappingRule(f"Invalid rule: {rule}")
    if match.end() != len(rule):
        raise InvalidMappingRule(
            f"Invalid rule: `{rule}`, unmatched substring: `{rule[match.end() :]}`"
        )
    if match.group(1) is not None:
        return _Rule(None)
    if match.group(2) is None:
        return None  # an empty rule
    source, replacement = match.group(2), match.group(4)
    try:
        pattern = re.compile(_JAVA_NAMED_GROUP.sub("(?P<", source))
    except re.error as exc:
        raise InvalidMappingRule(
            f"Invalid rule: `{rule}`: pattern {source!r}: {exc}"
        ) from None
    escaped = _escape_literal_back_references(replacement, pattern.groups)
    try:
        parts = _compile_replacement(escaped, pattern.groups, set(pattern.groupindex))
    except InvalidMappingRule as exc:
        raise InvalidMappingRule(f"Invalid rule: `{rule}`: {exc}") from None
    return _Rule(pattern, source, replacement, parts, match.group(6) or "")


class SslPrincipalMapper:
    """The parsed rules; :meth:`name` maps one distinguished name (RFC 2253)."""

    __slots__ = ("_rules",)

    def __init__(self, rules: str | None = None) -> None:
        text = DEFAULT_SSL_PRINCIPAL_MAPPING_RULES if rules is None else rules
        self._rules = tuple(r for r in map(_parse, _split(text)) if r is not None)

    def name(self, distinguished_name: str) -> str:
        for rule in self._rules:
            mapped = rule.apply(distinguished_name)
            if mapped is not None:
                return mapped
        raise NoMatchingRule(
            f"No rules apply to {distinguished_name}, rules {self._listing()}"
        )

    def _listing(self) -> str:
        return "[" + ", ".join(map(str, self._rules)) + "]"

    def __str__(self) -> str:
        return f"SslPrincipalMapper(rules = {self._listing()})"

"""java.lang.String semantics that Kafka's client-metrics code depends on.

Kafka parses subscription configs and hashes metric names with Java's String methods;
Python's look-alikes differ at the edges, so the exact Java behaviour lives here:

| Java                          | Python look-alike      | difference                                        |
|-------------------------------|------------------------|---------------------------------------------------|
| ``String.trim()``             | ``str.strip()``        | Java strips only chars <= U+0020, Python all      |
|                               |                        | Unicode whitespace (U+00A0, U+3000, ...)          |
| ``String.split("=")``         | ``str.split("=")``     | Java drops trailing empty strings                 |
| ``String.hashCode()``         | ``hash(str)``          | Java: ``31*h + c`` over UTF-16 code units, int32  |
| ``Integer.parseInt(s)``       | ``int(s)``             | Python accepts ``1_000``, spaces, any size        |
| ``s.getBytes(UTF_8)``         | ``s.encode()``         | Java writes ``?`` for an unpaired surrogate       |
"""

from __future__ import annotations

import functools
import re
import sys
from array import array

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "java_parse_int",
    "java_split",
    "java_trim",
    "java_utf8",
    "string_hash_code",
    "to_int32",
    "utf16_code_units",
]

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

# Integer.parseInt(s, 10): an optional sign then decimal digits (Character.digit accepts any
# Unicode decimal digit, as does \d on str patterns); no underscores, no inner spaces.
_JAVA_INT = re.compile(r"[+-]?\d+")


def to_int32(value: int) -> int:
    """Wrap an integer to a signed 32-bit value (Java ``(int)`` cast)."""
    value &= 0xFFFFFFFF
    return value - 0x1_0000_0000 if value & 0x8000_0000 else value


def java_trim(text: str) -> str:
    """``String.trim()``: remove leading and trailing chars with code point <= U+0020."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def java_split(text: str, separator: str) -> list[str]:
    """``String.split(separator)`` for a literal one-char separator (limit 0).

    Java removes trailing empty strings, so ``"a=b=".split("=")`` is ``["a", "b"]`` and
    ``"a==".split("=")`` is ``["a"]``; an empty input yields ``[""]``.
    """
    parts = text.split(separator)
    if text == "":
        return [""]
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def java_parse_int(text: str) -> int | None:
    """``Integer.parseInt(text)``; None where Java throws NumberFormatException."""
    if not _JAVA_INT.fullmatch(text):
        return None
    value = int(text)
    if value < INT32_MIN or value > INT32_MAX:
        return None
    return value


def utf16_code_units(text: str) -> list[int]:
    """The UTF-16 code units Java stores for ``text`` (astral chars become surrogate pairs)."""
    units = array("H", text.encode("utf-16-le", "surrogatepass"))
    if sys.byteorder == "big":
        units.byteswap()
    return units.tolist()


@functools.lru_cache(maxsize=65536)
def string_hash_code(text: str) -> int:
    """``String.hashCode()``: ``s[0]*31^(n-1) + ... + s[n-1]`` in int32 over UTF-16 code units.

    Worked example: ``"Aa"`` = 65*31 + 97 = 2112 and ``"BB"`` = 66*31 + 66 = 2112, the
    classic collision; ``"😀"`` (U+1F600) hashes its surrogates 0xD83D, 0xDE00.
    Cached: the same metric names are hashed for every merged set.
    """
    h = 0
    for unit in utf16_code_units(text):
        h = (31 * h + unit) & 0xFFFFFFFF
    return to_int32(h)


def java_utf8(text: str) -> bytes:
    """``text.getBytes(StandardCharsets.UTF_8)``.

    A Python str can hold a surrogate pair as two code points where Java sees one
    character, so pairs are joined first; a surrogate left unpaired becomes ``?`` as in
    Java's encoder. Text without surrogates (the normal case) is encoded directly.
    """
    try:
        return text.encode("utf-8")  # fails only if text holds surrogate code points
    except UnicodeEncodeError:
        pass
    out: list[str] = []
    units = utf16_code_units(text)
    i = 0
    while i < len(units):
        unit = units[i]
        if (
            0xD800 <= unit <= 0xDBFF
            and i + 1 < len(units)
            and 0xDC00 <= units[i + 1] <= 0xDFFF
        ):
            out.append(chr(0x10000 + ((unit - 0xD800) << 10) + (units[i + 1] - 0xDC00)))
            i += 2
        elif 0xD800 <= unit <= 0xDFFF:
            out.append("?")
            i += 1
        else:
            out.append(chr(unit))
            i += 1
    return "".join(out).encode("utf-8")

"""Query results as text: an aligned ``table``, ``csv`` (RFC 4180, a header row) or
``json`` (one object per line)."""

from __future__ import annotations

import csv
import datetime
import decimal
import json
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

__all__ = ["FORMATS", "write_rows"]

FORMATS = ("table", "csv", "json")


def _json_default(value: Any) -> Any:
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if hasattr(value, "asDict"):
        return value.asDict(recursive=True)
    raise TypeError(f"cannot encode {type(value).__name__}")


def _plain(value: Any) -> Any:
    """A Spark value as JSON-ready Python (Rows -> dicts, recursively)."""
    if hasattr(value, "asDict"):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _text(value: Any, null: str) -> str:
    if value is None:
        return null
    if isinstance(value, (dict, list)) or hasattr(value, "asDict"):
        return json.dumps(_plain(value), default=_json_default, ensure_ascii=False)
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ")
    return str(value)


def _json_line(columns: Sequence[str], row: Sequence[Any]) -> str:
    record = dict(zip(columns, (_plain(v) for v in row), strict=True))
    return json.dumps(record, default=_json_default, ensure_ascii=False) + "\n"


def write_rows(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], fmt: str, out: TextIO
) -> None:
    """Render query results: ``table`` (aligned text), ``csv`` (RFC 4180, header row) or
    ``json`` (one object per line)."""
    if fmt == "json":
        out.writelines(_json_line(columns, row) for row in rows)
    elif fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_text(v, "") for v in row])
    elif fmt == "table":
        cells = [[_text(v, "NULL") for v in row] for row in rows]
        widths = [
            max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)
        ]
        out.write(
            "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()
            + "\n"
        )
        out.write("  ".join("-" * w for w in widths) + "\n")
        out.writelines(
            "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            + "\n"
            for r in cells
        )
        out.write(f"({len(cells)} row{'s' if len(cells) != 1 else ''})\n")
    else:
        raise ValueError(f"unknown format {fmt!r}")

"""Durable, hand-editable YAML config documents: atomic writes and line-aware loading.

A generic base for the two documents the collector keeps under ``<data-dir>/config/``
(``client-metrics.yaml`` and ``quotas.yaml``): each is one mapping under a top-level key,
``entry name -> {key: value}``. Loading validates the whole file and reports the first
problem with the file, line and key; writing replaces the file atomically so a crash
leaves either the old or the new content, never a mix:

1. write ``.<name>.tmp-<pid>-<n>`` in the same directory, flush, ``fsync``;
2. ``os.replace`` it over the file (atomic on POSIX);
3. ``fsync`` the directory so the rename itself survives a power loss.
"""

from __future__ import annotations

import abc
import itertools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import yaml  # type: ignore[import-untyped]

from proto.errors import KafkaError

__all__ = [
    "TMP_MARKER",
    "ConfigDocument",
    "ConfigFileError",
    "Located",
    "atomic_write_text",
]

StateT = TypeVar("StateT")
TMP_MARKER = ".tmp-"
_tmp_counter = itertools.count()


class ConfigFileError(ValueError):
    """Invalid content in a config file; the message names the file, line and key."""

    def __init__(
        self, path: Path, line: int | None, key: str | None, problem: str
    ) -> None:
        where = f"{path}" + (f", line {line}" if line is not None else "")
        what = f" at {key!r}" if key else ""
        super().__init__(f"{where}{what}: {problem}")
        self.path = path
        self.line = line
        self.key = key
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Located:
    """A YAML value with the (1-based) line it was written on."""

    value: Any
    line: int


def atomic_write_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically and durably (see module docstring)."""
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{path.name}{TMP_MARKER}{os.getpid()}-{next(_tmp_counter)}"
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    directory_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(directory_fd)
    finally:
        os.close(directory_fd)


def remove_stale_tmp_files(directory: Path, name: str) -> None:
    """Delete temp files a crashed writer left behind (they are never read)."""
    for stale in directory.glob(f".{name}{TMP_MARKER}*"):
        stale.unlink(missing_ok=True)


def _located(node: yaml.Node, path: Path) -> Any:
    """Turn a composed YAML node into plain data, mappings as ``{key: Located(value)}``."""
    if isinstance(node, yaml.MappingNode):
        result: dict[Any, Located] = {}
        for key_node, value_node in node.value:
            key = _scalar(key_node, path)
            if key in result:
                raise ConfigFileError(
                    path,
                    key_node.start_mark.line + 1,
                    str(key),
                    f"duplicate key (first written on line {result[key].line})",
                )
            result[key] = Located(
                _located(value_node, path), key_node.start_mark.line + 1
            )
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_located(item, path) for item in node.value]
    return _scalar(node, path) if node is not None else None


# YAML 1.2's core-schema float (the forms YAML 1.1 reads as text: no dot, or no sign in
# the exponent).
_YAML12_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")


def _scalar(node: yaml.Node, path: Path) -> Any:
    if not isinstance(node, yaml.ScalarNode):
        raise ConfigFileError(
            path, node.start_mark.line + 1, None, "expected a plain value here"
        )
    loader = yaml.SafeLoader("")
    try:
        value = loader.construct_object(node, deep=True)
    finally:
        loader.dispose()
    if isinstance(value, str) and node.style is None and _YAML12_FLOAT.fullmatch(value):
        # An unquoted number such as 1e6 is a float in YAML 1.2; PyYAML (YAML 1.1) wants
        # 1.0e+6.  A quoted "100" stays text.
        return float(value)
    return value


class ConfigDocument(abc.ABC, Generic[StateT]):
    """One YAML document ``{top_key: {entry: {key: value}}}`` with a validated state."""

    filename: str
    top_key: str
    header: str

    def __init__(self, config_dir: Path) -> None:
        self.path = config_dir / self.filename

    def load(self) -> StateT:
        """Read and validate the file (missing or empty file = empty state)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return self.empty()
        except OSError as exc:
            raise ConfigFileError(self.path, None, None, f"cannot read: {exc}") from exc
        return self.parse_text(text)

    def parse_text(self, text: str) -> StateT:
        try:
            node = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = mark.line + 1 if mark is not None else None
            # PyYAML's own text spans several lines (context, a caret): the problem alone.
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise ConfigFileError(
                self.path, line, None, f"not valid YAML: {problem}"
            ) from None
        if node is None:
            return self.empty()
        document = _located(node, self.path)
        if not isinstance(document, dict) or set(document) - {self.top_key}:
            raise ConfigFileError(
                self.path, 1, None, f"expected a single top-level key {self.top_key!r}"
            )
        entries = document.get(self.top_key)
        if entries is None or entries.value is None:
            return self.empty()
        if not isinstance(entries.value, dict):
            raise ConfigFileError(
                self.path, entries.line, self.top_key, "expected a mapping"
            )
        return self.parse_entries(entries.value)

    def save(self, state: StateT) -> None:
        """Write ``state`` atomically, replacing the file (comments are not preserved)."""
        body = yaml.safe_dump(
            {self.top_key: self.render(state)},
            sort_keys=False,
            allow_unicode=True,
            default_flow_style=False,
        )
        remove_stale_tmp_files(self.path.parent, self.filename)
        atomic_write_text(self.path, self.header + body)

    def fail(
        self, line: int | None, key: str | None, error: Exception | str
    ) -> ConfigFileError:
        """A ConfigFileError for this document (Kafka errors keep their code name)."""
        if isinstance(error, KafkaError):
            problem = f"{error} ({error.error_code.name})"
        else:
            problem = str(error)
        return ConfigFileError(self.path, line, key, problem)

    @abc.abstractmethod
    def empty(self) -> StateT: ...

    @abc.abstractmethod
    def parse_entries(self, entries: Mapping[Any, Located]) -> StateT: ...

    @abc.abstractmethod
    def render(self, state: StateT) -> dict[str, Any]: ...

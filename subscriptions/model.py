"""A client-metrics subscription and Kafka's validation of its configs.

Follows ``server/.../metrics/ClientMetricsConfigs.java`` (Apache Kafka 4.4.0) plus the
``ConfigDef`` parsing it relies on. A subscription is a named CLIENT_METRICS config
resource with three keys (KIP-714; Kafka's ``ClientMetricsConfigs``):

| key           | type | default  | invalid value                                  |
|---------------|------|----------|------------------------------------------------|
| ``metrics``   | LIST | ``[]``   | empty item -> INVALID_CONFIG (repeats dropped)  |
| ``interval.ms``| INT | 300000   | not an int -> INVALID_CONFIG; outside           |
|               |      |          | 100..3600000 -> INVALID_REQUEST                |
| ``match``     | LIST | ``[]``   | item not ``selector=regex`` -> INVALID_CONFIG  |
|               |      |          | (repeats dropped)                              |
| anything else |      |          | INVALID_REQUEST                                |

An altered value longer than 32767 UTF-16 units is INVALID_CONFIG before any of these
(the controller's ``ConfigRecord`` limit; :func:`check_altered_value_length`).

Checks run in Kafka's order: null values, subscription name, unknown keys, then each key
parsed and validated in definition order (metrics, interval.ms, match), then the
interval range, then the match patterns. The first failure is reported.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from proto.errors import Errors, KafkaError
from subscriptions.java_lang import (
    java_parse_int,
    java_split,
    java_trim,
    utf16_code_units,
)
from subscriptions.match_pattern import MatchPattern, MatchPatternError

__all__ = [
    "ALL_METRICS",
    "CONFIG_INTERVAL_MS",
    "CONFIG_KEYS",
    "CONFIG_MATCH",
    "CONFIG_METRICS",
    "DEFAULT_INTERVAL_MS",
    "MAX_CONFIG_VALUE_LENGTH",
    "MAX_INTERVAL_MS",
    "MIN_INTERVAL_MS",
    "SELECTORS",
    "ConfigKey",
    "Subscription",
    "check_altered_value_length",
    "compile_match_pattern",
    "normalise_config_value",
    "normalise_list_value",
    "parse_list",
    "render_list",
]

CONFIG_METRICS = "metrics"
CONFIG_INTERVAL_MS = "interval.ms"
CONFIG_MATCH = "match"

ALL_METRICS = "*"  # ClientMetricsConfigs.ALL_SUBSCRIBED_METRICS
DEFAULT_INTERVAL_MS = 300_000  # 5 minutes
MIN_INTERVAL_MS = 100
MAX_INTERVAL_MS = 3_600_000  # 1 hour
# Short.MAX_VALUE: the longest value a KRaft ConfigRecord holds, in Java chars (UTF-16 units).
MAX_CONFIG_VALUE_LENGTH = 32_767

SELECTORS: tuple[str, ...] = (
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
)


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One ``ConfigDef`` entry of ClientMetricsConfigs."""

    name: str
    type: Literal["LIST", "INT"]
    default: str  # rendered like ConfigDef.convertToString
    documentation: str


# Definition order matters: ConfigDef.parse walks keys in this order, so the first
# invalid key in this order is the one reported.
CONFIG_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey(CONFIG_METRICS, "LIST", "", "Telemetry metric name prefix list"),
    ConfigKey(
        CONFIG_INTERVAL_MS,
        "INT",
        str(DEFAULT_INTERVAL_MS),
        "Metrics push interval in milliseconds",
    ),
    ConfigKey(CONFIG_MATCH, "LIST", "", "Client match criteria"),
)
_KNOWN_KEYS = frozenset(key.name for key in CONFIG_KEYS)

# ConfigDef.COMMA_WITH_WHITESPACE = "\\s*,\\s*"; Java's \s is ASCII whitespace only.
_COMMA_WITH_WHITESPACE = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")


def _invalid_config(message: str) -> KafkaError:
    return KafkaError(message, Errors.INVALID_CONFIG)


def _invalid_request(message: str) -> KafkaError:
    return KafkaError(message, Errors.INVALID_REQUEST)


def parse_list(value: str) -> list[str]:
    """``ConfigDef.parseType(LIST)`` of a string: trim; "" -> []; split on ``\\s*,\\s*``.

    Trailing empties are kept (``split(..., -1)``): ``"a,"`` -> ``["a", ""]``.
    """
    trimmed = java_trim(value)
    if not trimmed:
        return []
    return _COMMA_WITH_WHITESPACE.split(trimmed)


def render_list(items: tuple[str, ...] | list[str]) -> str:
    """``ConfigDef.convertToString(LIST)``: items joined by ``,`` without spaces."""
    return ",".join(items)


def _unique(items: list[str]) -> list[str]:
    """The items without repeats, first occurrence first (Kafka 4.4.0 keeps a LIST config's
    first occurrence of each value and drops the rest, with a warning)."""
    return list(dict.fromkeys(items))


def normalise_list_value(value: str) -> str:
    """A LIST config value as Kafka 4.4.0 stores and describes it: parsed (trimmed, split on
    commas with the whitespace around them), repeats dropped, joined by ``,``
    (``" a, b ,a"`` is stored as ``"a,b"``)."""
    return render_list(_unique(parse_list(value)))


def normalise_config_value(key: str, value: str) -> str:
    """A value as Kafka 4.4.0 stores and describes it: a LIST parsed and rendered again
    (:func:`normalise_list_value`), an INT that parses as its number (``" 1000 "`` is
    stored as ``"1000"``); anything else as sent (validation refuses it anyway)."""
    if key == CONFIG_INTERVAL_MS:
        parsed = java_parse_int(java_trim(value))
        return value if parsed is None else str(parsed)
    if key in (CONFIG_METRICS, CONFIG_MATCH):
        return normalise_list_value(value)
    return value


def _check_list_items(key: str, items: list[str]) -> None:
    """``ValidList.anyNonDuplicateValues(true, false)`` on the list Kafka 4.4.0 validates: its
    repeats already dropped (``metrics=a,a`` is accepted as ``a``), empty items refused."""
    if any(item == "" for item in items):
        raise _invalid_config(f"Configuration '{key}' values must not be empty.")


def check_altered_value_length(value: str) -> None:
    """ConfigurationControlManager.validateAlterConfig (KAFKA-18907, Kafka 4.0+).

    Checked for each value an alteration changes, before the subscription's own
    validation; ``String.length()`` counts UTF-16 units.
    """
    if (
        len(value) * 2 > MAX_CONFIG_VALUE_LENGTH
        and len(utf16_code_units(value)) > MAX_CONFIG_VALUE_LENGTH
    ):
        raise _invalid_config(
            "The configuration value cannot be added because it exceeds the maximum value "
            f"size of {MAX_CONFIG_VALUE_LENGTH} bytes."
        )


def _parse_int(key: str, value: str) -> int:
    parsed = java_parse_int(java_trim(value))
    if parsed is None:
        # ConfigException(name, value, "Not a number of type INT")
        raise _invalid_config(
            f"Invalid value {value} for configuration {key}: Not a number of type INT"
        )
    return parsed


def _split_match_item(item: str) -> tuple[str, str]:
    """``pattern.split("=")`` must give exactly two parts; both trimmed; known selector.

    Java drops trailing empty parts, so ``client_id=`` (one part) is rejected while
    ``client_id=a=`` (parts ``client_id``, ``a``) is accepted; a regex cannot contain '='.
    """
    parts = java_split(item, "=")
    if len(parts) != 2:
        raise _invalid_config(f"Illegal client matching pattern: {item}")
    selector = java_trim(parts[0])
    if selector not in SELECTORS:
        raise _invalid_config(f"Illegal client matching pattern: {item}")
    return selector, java_trim(parts[1])


def compile_match_pattern(
    selector: str, regex: str, item: str | None = None
) -> MatchPattern:
    """Compile a match regex (a full match, as Java's ``Matcher.matches()``).

    RE2 stands in for ``java.util.regex`` (linear-time matching; match_pattern.py lists
    where the dialects differ); a pattern RE2 cannot compile is rejected with Kafka's
    message, as Java rejects what it cannot compile.
    """
    try:
        return MatchPattern(regex)
    except MatchPatternError:
        raise _invalid_config(
            f"Illegal client matching pattern: {item if item is not None else f'{selector}={regex}'}"
        ) from None


@dataclass(frozen=True, slots=True)
class Subscription:
    """A validated subscription.

    ``metrics`` are the prefixes in configured order (a single ``"*"`` = all);
    ``match`` the ``(selector, regex)`` pairs in configured order (empty = every client;
    a selector listed twice: the last one counts, as in Kafka's HashMap);
    ``configured_keys`` the keys explicitly set (the rest are defaults).
    """

    name: str
    metrics: tuple[str, ...] = ()
    interval_ms: int = DEFAULT_INTERVAL_MS
    match: tuple[tuple[str, str], ...] = ()
    configured_keys: frozenset[str] = field(default=frozenset(_KNOWN_KEYS))
    patterns: Mapping[str, MatchPattern] = field(
        init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        if not self.name:
            raise _invalid_request("Subscription name can't be empty")
        compiled: dict[str, MatchPattern] = {}
        for selector, regex in self.match:
            if selector not in SELECTORS:
                raise _invalid_config(
                    f"Illegal client matching pattern: {selector}={regex}"
                )
            compiled[selector] = compile_match_pattern(selector, regex)
        object.__setattr__(self, "patterns", compiled)

    @property
    def all_metrics(self) -> bool:
        return ALL_METRICS in self.metrics

    @classmethod
    def from_configs(cls, name: str, configs: Mapping[str, str | None]) -> Subscription:
        """Validate a full config map exactly as Kafka's controller does and build it.

        Raises ``KafkaError`` with INVALID_CONFIG or INVALID_REQUEST and Kafka's message.
        An empty map is valid (all defaults); the store treats it as "no subscription".
        """
        nulls = [key for key, value in configs.items() if value is None]
        if nulls:
            # ConfigAdminManager.preprocess, before the controller sees the request
            raise _invalid_request("Null value not supported for : " + ", ".join(nulls))
        if not name:
            raise _invalid_request("Subscription name can't be empty")
        for key in configs:
            if key not in _KNOWN_KEYS:
                raise _invalid_request(f"Unknown client metrics configuration: {key}")
        values: dict[str, str] = {
            key: value for key, value in configs.items() if value is not None
        }

        metrics = _unique(parse_list(values.get(CONFIG_METRICS, "")))
        _check_list_items(CONFIG_METRICS, metrics)
        interval_ms = DEFAULT_INTERVAL_MS
        if CONFIG_INTERVAL_MS in values:
            interval_ms = _parse_int(CONFIG_INTERVAL_MS, values[CONFIG_INTERVAL_MS])
        match_items = _unique(parse_list(values.get(CONFIG_MATCH, "")))
        _check_list_items(CONFIG_MATCH, match_items)

        if (
            CONFIG_INTERVAL_MS in values
            and not MIN_INTERVAL_MS <= interval_ms <= MAX_INTERVAL_MS
        ):
            raise _invalid_request(
                f"Invalid value {interval_ms} for {CONFIG_INTERVAL_MS}, interval must be "
                f"between {MIN_INTERVAL_MS} and {MAX_INTERVAL_MS} (1 hour)"
            )
        match: list[tuple[str, str]] = []
        for item in match_items:
            selector, regex = _split_match_item(item)
            compile_match_pattern(selector, regex, item)
            match.append((selector, regex))

        return cls(
            name=name,
            metrics=tuple(metrics),
            interval_ms=interval_ms,
            match=tuple(match),
            configured_keys=frozenset(values),
        )

    def to_configs(self, include_defaults: bool = False) -> dict[str, str]:
        """Render as Kafka config strings (``ConfigDef.convertToString``), in key order.

        Only explicitly set keys unless ``include_defaults`` (Kafka 4.1+ describe).
        """
        rendered = {
            CONFIG_METRICS: render_list(self.metrics),
            CONFIG_INTERVAL_MS: str(self.interval_ms),
            CONFIG_MATCH: render_list(
                [f"{selector}={regex}" for selector, regex in self.match]
            ),
        }
        return {
            key.name: rendered[key.name]
            for key in CONFIG_KEYS
            if include_defaults or key.name in self.configured_keys
        }

"""Where the collector's configuration values come from, before they are validated: the
YAML file, the ``KTC_*`` environment variables and Kafka's config providers (``${env:VAR}``).

Every problem is a :class:`ConfigError` whose message names the key.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from collector.security.secrets import (
    PROVIDERS_KEY,
    ProviderError,
    declared_providers,
    is_password_key,
    resolve_references,
)

__all__ = [
    "ConfigError",
    "env_overrides",
    "env_var_for",
    "read_config_file",
    "resolve_config_references",
]

ENV_PREFIX = "KTC_"


class ConfigError(ValueError):
    """A configuration problem; the message names the offending key."""


def env_var_for(key: str) -> str:
    """``telemetry.max.bytes`` -> ``KTC_TELEMETRY_MAX_BYTES``."""
    return ENV_PREFIX + key.upper().replace(".", "_").replace("-", "_")


def env_overrides(environ: Mapping[str, str], keys: Iterable[str]) -> dict[str, Any]:
    """The ``KTC_*`` variables of ``keys`` set in ``environ``, read as YAML values."""
    out: dict[str, Any] = {}
    for key in keys:
        raw = environ.get(env_var_for(key))
        if raw is None:
            continue
        if is_password_key(key):  # a secret is a string as it is (123456 is no number)
            out[key] = raw if raw != "" else None
            continue
        try:
            out[key] = yaml.safe_load(raw) if raw != "" else None
        except yaml.YAMLError as exc:
            raise ConfigError(
                f"{env_var_for(key)} ({key}): not a YAML value: {exc}"
            ) from exc
    return out


def resolve_config_references(
    data: dict[str, Any], environ: Mapping[str, str], source: str
) -> dict[str, Any]:
    """Kafka's config providers: ``config.providers: env`` (or ``KTC_CONFIG_PROVIDERS``)
    lets values say ``${env:VAR}``; the declarations are the loader's, not settings."""
    directives = {
        k: data.pop(k)
        for k in list(data)
        if k == PROVIDERS_KEY or k.startswith(PROVIDERS_KEY + ".")
    }
    if env_var_for(PROVIDERS_KEY) in environ:
        directives[PROVIDERS_KEY] = environ[env_var_for(PROVIDERS_KEY)]
    try:
        providers = declared_providers(directives)
        return {
            k: resolve_references(v, k, providers, environ) for k, v in data.items()
        }
    except ProviderError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The dotted keys of a YAML file (a secret's value a string)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror}") from exc
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {_yaml_problem(exc)}") from None
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of dotted keys")
    data = {str(k): v for k, v in loaded.items()}
    for key, value in data.items():
        if is_password_key(key) and value is not None and not isinstance(value, str):
            raise ConfigError(f"{path}: {key}: must be a string (quote it in YAML)")
    return data


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's message on one line: what is wrong and where (its own spans several)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is None:
        return str(problem)
    return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"

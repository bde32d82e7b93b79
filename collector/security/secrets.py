"""Secrets in configuration: which keys hold them, how they are printed, and Kafka's
``${env:VAR}`` references that keep them out of config files.

Password-typed keys (Kafka's ``ConfigDef.Type.PASSWORD``) are recognised by name:

| a key                          | e.g.                                                        |
|--------------------------------|-------------------------------------------------------------|
| ending in ``.password``        | ``ssl.key.password``, ``gateway.upstream.ssl.key.password`` |
| ending in ``sasl.jaas.config`` | ``listener.name.sasl_ssl.plain.sasl.jaas.config``           |
| ending in ``.secret``          | ``sasl.oauthbearer.client.credentials.client.secret``       |

Their values are printed as ``[hidden]`` (Kafka's ``Password.HIDDEN``) wherever a
configuration is shown, and are taken as strings as they are (never parsed as YAML numbers).

Config providers follow Kafka's ``ConfigTransformer``: with ``config.providers: env``
declared, a value ``${env:VAR}`` (or ``${env::VAR}``, Kafka's empty path) is replaced by
the environment variable ``VAR``; references may sit inside a longer string and inside
maps (``exporters.otlp`` headers). Unlike Kafka, which leaves a reference it cannot resolve
as literal text, an unset variable or an undeclared provider is an error naming the key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "ENV_PROVIDER_CLASS",
    "HIDDEN",
    "PROVIDERS_KEY",
    "ProviderError",
    "declared_providers",
    "is_password_key",
    "redact",
    "resolve_references",
]

HIDDEN = "[hidden]"
ENV_PROVIDER_CLASS = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
PROVIDERS_KEY = "config.providers"

_PASSWORD_SUFFIXES = (".password", "sasl.jaas.config", ".secret")
# Kafka's ConfigTransformer.DEFAULT_PATTERN: ${provider:[path:]key}.
_PROVIDER_CLASS = re.compile(r"config\.providers\.[^.]+\.class")
_REFERENCE = re.compile(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}")


class ProviderError(ValueError):
    """A reference that cannot be resolved; the message names the key, never a value."""


def is_password_key(key: str) -> bool:
    return key.endswith(_PASSWORD_SUFFIXES)


def redact(value: Any, key: str = "") -> Any:
    """A copy of ``value`` with every password-typed key's value shown as ``[hidden]``
    (maps are walked; a map's keys name its values)."""
    if key and is_password_key(key) and value is not None:
        return HIDDEN
    if isinstance(value, Mapping):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    return value


def declared_providers(data: Mapping[str, Any]) -> set[str]:
    """``config.providers`` (a comma list, as Kafka) and each provider's class, checked:
    ``env`` is the one provider here."""
    stray = sorted(
        k for k in data if k != PROVIDERS_KEY and _PROVIDER_CLASS.fullmatch(k) is None
    )
    if stray:
        raise ProviderError(
            f"{', '.join(stray)}: not supported (config.providers and "
            "config.providers.env.class are)"
        )
    raw = data.get(PROVIDERS_KEY)
    if raw is None:
        return set()
    names = {n.strip() for n in str(raw).split(",") if n.strip()}
    unknown = sorted(names - {"env"})
    if unknown:
        raise ProviderError(
            f"{PROVIDERS_KEY}: {', '.join(unknown)} not supported (env is: "
            "Kafka's EnvVarConfigProvider)"
        )
    for name in names:
        cls = data.get(f"{PROVIDERS_KEY}.{name}.class")
        if cls is not None and cls != ENV_PROVIDER_CLASS:
            raise ProviderError(
                f"{PROVIDERS_KEY}.{name}.class: must be {ENV_PROVIDER_CLASS}"
            )
    return names


def resolve_references(
    value: Any, key: str, providers: set[str], environ: Mapping[str, str]
) -> Any:
    """``value`` with its ``${env:VAR}`` references replaced (strings inside maps and lists
    too); :class:`ProviderError` names ``key`` and the variable, never the value."""
    if isinstance(value, Mapping):
        return {
            k: resolve_references(v, f"{key}.{k}", providers, environ)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [resolve_references(v, key, providers, environ) for v in value]
    if not isinstance(value, str) or "${" not in value:
        return value

    def substitute(match: re.Match[str]) -> str:
        provider, path, variable = match.group(1), match.group(3), match.group(4)
        if provider not in providers:
            raise ProviderError(
                f"{key}: refers to config provider {provider!r}, which is not declared "
                f"({PROVIDERS_KEY}: env enables ${{env:VAR}})"
            )
        if path:
            raise ProviderError(
                f"{key}: ${{env:...}} takes no path (got path {path!r}); write ${{env:VAR}}"
            )
        if variable not in environ:
            raise ProviderError(f"{key}: environment variable {variable} is not set")
        return environ[variable]

    return _REFERENCE.sub(substitute, value)

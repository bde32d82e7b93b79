"""kafka-configs.sh's SCRAM syntax, for ``ktc users``:

    --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]'
    --delete-config 'SCRAM-SHA-512'

As Kafka's ``ConfigCommand``: entries are separated by commas outside brackets; a mechanism
takes ``password`` (required) and ``iterations`` (default 4096, Kafka's
``DefaultScramIterations``); each mechanism at most once. Problems raise ``ValueError``
with a message for the command line (the password never appears in it).
"""

from __future__ import annotations

from dataclasses import dataclass

from collector.security.credentials import ScramMechanism

__all__ = [
    "DEFAULT_ITERATIONS",
    "ScramConfig",
    "parse_add_config",
    "parse_delete_config",
]

DEFAULT_ITERATIONS = 4096


@dataclass(frozen=True, slots=True)
class ScramConfig:
    mechanism: ScramMechanism
    iterations: int
    password: str

    def __repr__(self) -> str:
        return f"ScramConfig({self.mechanism.mechanism_name}, iterations={self.iterations})"


def _split_outside_brackets(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise ValueError("unbalanced ']'")
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth != 0:
        raise ValueError("unbalanced '['")
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def _mechanism(name: str) -> ScramMechanism:
    mechanism = ScramMechanism.from_name(name.strip())
    if mechanism is None:
        raise ValueError(
            f"unknown SCRAM mechanism {name.strip()!r} (SCRAM-SHA-256 or SCRAM-SHA-512)"
        )
    return mechanism


def parse_add_config(text: str) -> list[ScramConfig]:
    """``MECHANISM=[iterations=N,password=P],...`` -> one ScramConfig per mechanism."""
    configs: dict[ScramMechanism, ScramConfig] = {}
    for entry in _split_outside_brackets(text):
        name, sep, value = entry.partition("=")
        mechanism = _mechanism(name)
        value = value.strip()
        if not sep or not (value.startswith("[") and value.endswith("]")):
            raise ValueError(
                f"{mechanism.mechanism_name}: expected "
                f"{mechanism.mechanism_name}=[iterations=N,password=...]"
            )
        if mechanism in configs:
            raise ValueError(f"{mechanism.mechanism_name} is given twice")
        options: dict[str, str] = {}
        for item in value[1:-1].split(","):
            key, eq, option = item.partition("=")
            key = key.strip()
            if not eq or key not in ("iterations", "password"):
                # Not echoed: after a ',' in a password, the "key" is part of it.
                raise ValueError(
                    f"{mechanism.mechanism_name}: expected only iterations=N and "
                    "password=... (a password cannot contain ',' or ']')"
                )
            if key in options:
                raise ValueError(f"{mechanism.mechanism_name}: {key} is given twice")
            options[key] = option
        if not options.get("password"):
            raise ValueError(f"{mechanism.mechanism_name}: password is required")
        iterations_text = options.get("iterations", str(DEFAULT_ITERATIONS)).strip()
        if not iterations_text.isdigit():
            raise ValueError(
                f"{mechanism.mechanism_name}: iterations must be a number, "
                f"got {iterations_text!r}"
            )
        configs[mechanism] = ScramConfig(
            mechanism, int(iterations_text), options["password"]
        )
    return list(configs.values())


def parse_delete_config(text: str) -> list[ScramMechanism]:
    """``SCRAM-SHA-256,SCRAM-SHA-512`` -> the mechanisms."""
    mechanisms = [_mechanism(name) for name in text.split(",") if name.strip()]
    if len(set(mechanisms)) != len(mechanisms):
        raise ValueError("a mechanism is given twice")
    return mechanisms

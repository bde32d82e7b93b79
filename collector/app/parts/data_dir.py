"""The data directory: the cluster id kept in it (``meta.properties``) and where the node
keeps each kind of state (``state-locations.json``)."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping
from pathlib import Path

from collector.app.config import CollectorConfig
from subscriptions.kafka_uuid import kafka_uuid_to_str, random_instance_id

__all__ = [
    "STATE_KINDS",
    "STATE_LOCATIONS_FILE",
    "StateLocations",
    "StateLocationsError",
    "open_data_dir",
    "read_state_locations",
    "record_state_locations",
]

log = logging.getLogger(__name__)


def open_data_dir(config: CollectorConfig) -> str:
    """Make the data directory; the cluster id (configured, else kept, else new)."""
    config.data_dir.mkdir(parents=True, exist_ok=True)
    return _read_or_create_cluster_id(
        config.data_dir, config.node_id, config.cluster_id
    )


def _read_or_create_cluster_id(
    data_dir: Path, node_id: int, configured: str | None
) -> str:
    """Like a KRaft broker's ``meta.properties``: the cluster id survives restarts."""
    meta = data_dir / "meta.properties"
    stored: dict[str, str] = {}
    if meta.exists():
        for line in meta.read_text(encoding="utf-8").splitlines():
            key, sep, value = line.partition("=")
            if sep and not line.startswith("#"):
                stored[key.strip()] = value.strip()
    cluster_id = (
        configured
        or stored.get("cluster.id")
        or kafka_uuid_to_str(random_instance_id())
    )
    if stored.get("cluster.id") not in (None, cluster_id):
        log.warning(
            "cluster.id %s differs from %s in %s; using the configured one",
            cluster_id,
            stored.get("cluster.id"),
            meta,
        )
    if stored.get("cluster.id") != cluster_id or stored.get("node.id") != str(node_id):
        tmp = meta.with_suffix(".tmp")
        tmp.write_text(
            f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n", encoding="utf-8"
        )
        tmp.replace(meta)
    return cluster_id


# --- where each kind of state lives ---------------------------------------------------------
# ``<data.dir>/state-locations.json``, written by the node at start (and again when that
# changes: a gateway that finds its cluster does not serve CLIENT_METRICS configs falls back
# to the local store), read by the ``ktc`` commands that work on a data directory, so that
# ``ktc subscriptions alter --data-dir D`` on a node whose subscriptions are a cluster's
# refuses instead of writing a file the node never reads:
#
#     {"version": 1, "mode": "gateway",
#      "subscriptions": {"kept": "cluster", "bootstrap.servers": "kafka-0:9092"},
#      "quotas": {"kept": "local"}, "users": {"kept": "cluster", ...}, "acls": {...}}

STATE_LOCATIONS_FILE = "state-locations.json"
# The kinds of state a ``ktc`` command manages in a data directory, and its command.
STATE_KINDS = ("subscriptions", "quotas", "users", "acls")
_VERSION = 1


@dataclasses.dataclass(frozen=True, slots=True)
class StateLocations:
    """Where a node keeps each kind of state: the bootstrap servers of the Kafka cluster
    that keeps it, or None for the node's data directory (every kind not named)."""

    mode: str
    clusters: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def cluster_of(self, kind: str) -> str | None:
        return self.clusters.get(kind)

    def to_json(self) -> str:
        document: dict[str, object] = {"version": _VERSION, "mode": self.mode}
        for kind in STATE_KINDS:
            cluster = self.clusters.get(kind)
            document[kind] = (
                {"kept": "local"}
                if cluster is None
                else {"kept": "cluster", "bootstrap.servers": cluster}
            )
        return json.dumps(document, indent=2) + "\n"


class StateLocationsError(ValueError):
    """A state-locations file that cannot be read or is not one (the message says why)."""


def record_state_locations(data_dir: Path, locations: StateLocations) -> bool:
    """Write ``locations`` to the data directory (atomically: a reader sees the old file or
    the new one); True when that changed the file."""
    path = data_dir / STATE_LOCATIONS_FILE
    text = locations.to_json()
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except OSError:
        pass  # not written yet (or unreadable: written anew)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return True


def read_state_locations(data_dir: Path) -> StateLocations | None:
    """What the data directory's node recorded; None when no node recorded anything (a
    directory no node started on keeps every state itself)."""
    path = data_dir / STATE_LOCATIONS_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateLocationsError(f"{path}: {exc.strerror or exc}") from None
    try:
        document = json.loads(text)
        if document.get("version") != _VERSION:
            raise ValueError(f"version {document.get('version')!r}, not {_VERSION}")
        clusters: dict[str, str] = {}
        for kind in STATE_KINDS:
            entry = document[kind]
            if entry["kept"] == "cluster":
                clusters[kind] = str(entry["bootstrap.servers"])
            elif entry["kept"] != "local":
                raise ValueError(f"{kind}: kept {entry['kept']!r}")
        return StateLocations(str(document["mode"]), clusters)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StateLocationsError(
            f"{path}: not a state-locations file ({type(exc).__name__}: {exc})"
        ) from None

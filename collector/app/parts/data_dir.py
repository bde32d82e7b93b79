"""The data directory and the cluster id kept in it (``meta.properties``)."""

from __future__ import annotations

import logging
from pathlib import Path

from collector.app.config import CollectorConfig
from subscriptions.kafka_uuid import kafka_uuid_to_str, random_instance_id

__all__ = ["open_data_dir"]

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

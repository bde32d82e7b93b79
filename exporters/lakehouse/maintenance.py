"""Compaction and retention of the point tables, safe to kill and re-run.

**Compaction.**  Every ingest batch adds one ``batch_id`` partition (a few small
files) to each ``(dt, hour)`` it touched: with a 10 s trigger that is 360 partitions
an hour.  Once an hour is closed (partitions follow the collector's receive time, so
a closed hour never gets new rows) its partitions are rewritten into one, in four
journaled steps:

1. refresh the table (another process may have written since this session listed
   it: compacting through a stale listing is how rows get lost), count the rows of
   the source partitions, and write ``_ingest/<db>/compactions/<table>/<dt>-<hour>.json``
   with the sources, the target ``batch_id`` (negative: never an ingest batch) and
   the count;
2. write the target partition from the sources (dynamic overwrite: a re-run replaces
   a partial target);
3. refresh, and check the target holds exactly the counted rows; only then
4. drop the source partitions, check again, delete the journal entry.

A re-run finds the journal entry: if the target is complete it finishes the drops,
otherwise (the sources are all still there, since nothing is dropped before step 3
passes) it rewrites the target.  Readers may see an hour twice between steps 2 and 4.
Runs inside the ingest process between batches, or holding the writer lock.

**Retention** drops whole ``dt`` partitions older than N days.  Spark SQL rejects
``DROP PARTITION (dt < x)``, so partitions are listed and dropped by exact spec.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import time
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from exporters.lakehouse.journal import IngestJournal, atomic_write_json
from exporters.lakehouse.schema import TABLES, TableSpec
from exporters.lakehouse.session import LakehouseConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "CompactionError",
    "CompactionReport",
    "Partition",
    "RetentionReport",
    "apply_retention",
    "compact",
    "list_partitions",
    "run_maintenance",
]

log = logging.getLogger(__name__)

_NANOS_PER_HOUR = 3_600 * 10**9
_DROP_CHUNK = 200  # partition specs per ALTER TABLE ... DROP statement
# Sort key of compacted files (those of the columns a table has): Parquet min/max
# statistics then prune by metric and client (ClickHouse's exporter orders by
# service, metric name, attributes, time).
_SORT_COLUMNS = (
    "metric_name",
    "client_instance_id",
    "time_unix_nano",
    "received_time_unix_nano",
)


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class Partition:
    dt: datetime.date
    hour: int
    batch_id: int

    @classmethod
    def parse(cls, spec: str) -> Partition:
        """From SHOW PARTITIONS' ``dt=2026-11-21/hour=5/batch_id=7``."""
        values = dict(part.split("=", 1) for part in spec.split("/"))
        return cls(
            datetime.date.fromisoformat(values["dt"]),
            int(values["hour"]),
            int(values["batch_id"]),
        )

    def sql_spec(self) -> str:
        return f"PARTITION (dt = DATE'{self.dt.isoformat()}', hour = {self.hour}, batch_id = {self.batch_id})"

    @property
    def hour_end_unix_ns(self) -> int:
        start = datetime.datetime.combine(
            self.dt, datetime.time(self.hour), datetime.UTC
        )
        return int(start.timestamp()) * 10**9 + _NANOS_PER_HOUR


class CompactionError(RuntimeError):
    """A check failed; nothing was dropped and the journal entry is kept for a re-run."""


@dataclasses.dataclass(frozen=True, slots=True)
class CompactionReport:
    hours_compacted: int
    partitions_replaced: int
    rows: int

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True, slots=True)
class RetentionReport:
    cutoff: datetime.date
    partitions_dropped: int

    def to_json(self) -> dict[str, Any]:
        return {
            "cutoff": self.cutoff.isoformat(),
            "partitions_dropped": self.partitions_dropped,
        }


def _qualified(config: LakehouseConfig, table: TableSpec) -> str:
    return f"`{config.database}`.`{table.name}`"


def list_partitions(
    spark: SparkSession, config: LakehouseConfig, table: TableSpec
) -> list[Partition]:
    name = _qualified(config, table)
    spark.catalog.refreshTable(name)
    return sorted(
        Partition.parse(r[0]) for r in spark.sql(f"SHOW PARTITIONS {name}").collect()
    )


def _count(
    spark: SparkSession, name: str, dt: datetime.date, hour: int, batch_ids: list[int]
) -> int:
    ids = ", ".join(str(b) for b in batch_ids)
    return spark.sql(
        f"SELECT count(*) FROM {name} WHERE dt = DATE'{dt.isoformat()}' AND hour = {hour} "
        f"AND batch_id IN ({ids})"
    ).collect()[0][0]


def _drop(spark: SparkSession, name: str, partitions: list[Partition]) -> None:
    for start in range(0, len(partitions), _DROP_CHUNK):
        specs = ", ".join(p.sql_spec() for p in partitions[start : start + _DROP_CHUNK])
        spark.sql(f"ALTER TABLE {name} DROP IF EXISTS {specs}")


def _journal_path(
    config: LakehouseConfig, table: TableSpec, dt: datetime.date, hour: int
) -> Path:
    return (
        config.state_dir
        / "compactions"
        / table.name
        / f"{dt.isoformat()}-{hour:02d}.json"
    )


def _compact_hour(
    spark: SparkSession,
    config: LakehouseConfig,
    table: TableSpec,
    dt: datetime.date,
    hour: int,
    present: list[int],
) -> int:
    name = _qualified(config, table)
    path = _journal_path(config, table, dt, hour)
    if path.exists():
        entry = json.loads(path.read_text())
        log.warning("resuming compaction of %s %s hour %d", name, dt, hour)
    else:
        sources = sorted(present)
        entry = {
            "sources": sources,
            # Negative ids are compactions; larger than any id present, so never in use.
            "target": -1 - max(abs(b) for b in sources),
            "rows": _count(spark, name, dt, hour, sources),
        }
        atomic_write_json(path, entry)
    sources, target, rows = (
        list(entry["sources"]),
        int(entry["target"]),
        int(entry["rows"]),
    )

    spark.catalog.refreshTable(name)
    if _count(spark, name, dt, hour, [target]) != rows:
        missing = set(sources) - set(present)
        if missing:
            raise CompactionError(
                f"{name} {dt} hour {hour}: target {target} incomplete and sources {sorted(missing)} "
                f"gone; journal {path} kept"
            )
        from pyspark.sql import functions as F

        ids = ", ".join(str(b) for b in sources)
        frame = (
            spark.table(name)
            .where(
                f"dt = DATE'{dt.isoformat()}' AND hour = {hour} AND batch_id IN ({ids})"
            )
            .repartition(1)
            .sortWithinPartitions(
                *[c for c in _SORT_COLUMNS if c in table.column_names]
            )
            .withColumn("batch_id", F.lit(target).cast("bigint"))
        )
        frame.write.mode("overwrite").insertInto(name)
        spark.catalog.refreshTable(name)
        written = _count(spark, name, dt, hour, [target])
        if written != rows:
            raise CompactionError(
                f"{name} {dt} hour {hour}: wrote {written} rows, expected {rows}; nothing dropped"
            )
    _drop(spark, name, [Partition(dt, hour, b) for b in sources])
    spark.catalog.refreshTable(name)
    after = _count(spark, name, dt, hour, sources + [target])
    if after != rows:
        raise CompactionError(
            f"{name} {dt} hour {hour}: {after} rows after compaction, expected {rows}"
        )
    path.unlink()
    return len(sources)


def compact(
    spark: SparkSession,
    config: LakehouseConfig,
    *,
    now_unix_ns: int,
    closed_after_ns: int = _NANOS_PER_HOUR,
) -> CompactionReport:
    """Compact every closed ``(dt, hour)`` with more than one partition, in all tables,
    finishing any compaction a killed run left in its journal first.

    Refuses while the ingest journal holds a plan without a commit: that batch will be
    replayed into its own partitions, which must not have been compacted away."""
    pending_plan = IngestJournal(config.state_dir).latest_plan()
    if pending_plan is not None and not IngestJournal(config.state_dir).is_committed(
        pending_plan.batch_id
    ):
        raise CompactionError(
            f"ingest batch {pending_plan.batch_id} is planned but not committed; run "
            "`ktc ingest --once` first (it replays the batch), then compact"
        )
    hours = replaced = rows_total = 0
    for table in TABLES:
        by_hour: dict[tuple[datetime.date, int], list[int]] = defaultdict(list)
        for partition in list_partitions(spark, config, table):
            by_hour[(partition.dt, partition.hour)].append(partition.batch_id)
        pending = {
            (datetime.date.fromisoformat(p.stem[:10]), int(p.stem[11:]))
            for p in (config.state_dir / "compactions" / table.name).glob("*.json")
        }
        for (dt, hour), batch_ids in sorted(by_hour.items()):
            closed = (
                Partition(dt, hour, 0).hour_end_unix_ns + closed_after_ns <= now_unix_ns
            )
            if (dt, hour) in pending or (closed and len(batch_ids) > 1):
                replaced += _compact_hour(spark, config, table, dt, hour, batch_ids)
                hours += 1
                rows_total += spark.sql(
                    f"SELECT count(*) FROM {_qualified(config, table)} "
                    f"WHERE dt = DATE'{dt.isoformat()}' AND hour = {hour}"
                ).collect()[0][0]
    return CompactionReport(hours, replaced, rows_total)


def apply_retention(
    spark: SparkSession, config: LakehouseConfig, *, days: int, today: datetime.date
) -> RetentionReport:
    """Drop every partition with ``dt`` before ``today - days`` (receive date, UTC)."""
    if days < 1:
        raise ValueError("days must be at least 1")
    cutoff = today - datetime.timedelta(days=days)
    dropped = 0
    for table in TABLES:
        old = [p for p in list_partitions(spark, config, table) if p.dt < cutoff]
        if old:
            _drop(spark, _qualified(config, table), old)
            spark.catalog.refreshTable(_qualified(config, table))
            dropped += len(old)
    return RetentionReport(cutoff, dropped)


def run_maintenance(
    spark: SparkSession, config: LakehouseConfig, *, retention_days: int | None
) -> None:
    """What the streaming ingest runs between batches."""
    now = time.time_ns()
    report = compact(spark, config, now_unix_ns=now)
    log.info("compaction: %s", report.to_json())
    if retention_days is not None:
        today = datetime.datetime.fromtimestamp(now / 1e9, datetime.UTC).date()
        log.info(
            "retention: %s",
            apply_retention(spark, config, days=retention_days, today=today).to_json(),
        )

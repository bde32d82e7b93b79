"""The Spark lakehouse: landing logs -> partitioned Parquet tables in a Hive metastore.

Modules: ``schema`` (tables, declared once), ``anyvalue`` (attribute encoding),
``flatten``/``rebuild`` (OTLP <-> rows, lossless), ``session`` (paths, Spark conf),
``journal`` (exactly-once plans and commits, writer lock), ``ingest`` (extract,
transform, load), ``catalog`` (tables and views), ``maintenance`` (compaction,
retention), ``cli`` (the ``ktc`` commands).  Only ``ingest``, ``catalog``,
``maintenance`` and ``cli`` touch Spark, and import it lazily.
"""

from exporters.lakehouse.flatten import PointRowsBuilder, flatten
from exporters.lakehouse.ingest import IngestJob, IngestSettings
from exporters.lakehouse.rebuild import rebuild
from exporters.lakehouse.schema import DEFAULT_DATABASE, TABLES
from exporters.lakehouse.session import LakehouseConfig

__all__ = [
    "DEFAULT_DATABASE",
    "TABLES",
    "IngestJob",
    "IngestSettings",
    "LakehouseConfig",
    "PointRowsBuilder",
    "flatten",
    "rebuild",
]

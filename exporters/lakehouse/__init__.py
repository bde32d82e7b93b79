"""The lakehouse: landing logs -> Apache Iceberg tables, read by Spark or pyiceberg + DuckDB.

Modules: ``schema`` (tables, declared once), ``anyvalue`` (attribute encoding),
``flatten``/``rebuild`` (OTLP <-> rows, lossless), ``session`` (paths, catalogs, Spark
conf), ``commits`` (exactly-once positions in snapshot summaries), ``ingest`` (extract,
transform, load), ``catalog`` (tables and views), ``maintenance`` (compaction,
retention, expiry), ``fastpath`` (``ktc sql`` without a JVM), ``cli`` (the ``ktc``
commands, a package: one module per command, their shared options and one registry).  Only ``ingest``, ``catalog``, ``maintenance`` and ``cli`` touch Spark, and
import it lazily.

Import from the modules themselves: the package imports nothing, so ``ktc sql`` does not
pay for the pyarrow, protobuf and OTLP classes that ingest needs.
"""

"""Suite-wide settings: every test is deterministic and local-only."""

from __future__ import annotations

import os
import sys

# Real Kafka clients and Spark must never reach beyond loopback.
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

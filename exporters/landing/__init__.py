"""The durable landing log: every accepted push, appended before it is acknowledged.

Writers use ``LandingLog`` (an Exporter), told how with ``LandingOptions``; consumers (the OTLP forwarder, the lakehouse
ingest) use ``LandingReader`` and keep their place with ``ConsumerPositions``. The format
is in format.py and docs/landing-log.md.
"""

from exporters.landing.durability import FsyncPolicy
from exporters.landing.layout import SegmentInfo, landing_directory, node_directories
from exporters.landing.log import (
    LandingError,
    LandingLog,
    LandingLogClosed,
    LandingLogLocked,
    LandingStats,
    RecordRejected,
    RecordTooLarge,
    UnlandedRecords,
)
from exporters.landing.options import LandingOptions
from exporters.landing.positions import (
    ConsumerPositions,
    PositionsError,
    committed_offsets,
)
from exporters.landing.reader import LandingReader, LandingRecord

__all__ = [
    "ConsumerPositions",
    "FsyncPolicy",
    "LandingError",
    "LandingLog",
    "LandingLogClosed",
    "LandingLogLocked",
    "LandingOptions",
    "LandingReader",
    "LandingRecord",
    "LandingStats",
    "PositionsError",
    "RecordRejected",
    "RecordTooLarge",
    "UnlandedRecords",
    "SegmentInfo",
    "committed_offsets",
    "landing_directory",
    "node_directories",
]

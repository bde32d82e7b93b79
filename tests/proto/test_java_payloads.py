"""Ground truth from the JVM: payloads compressed by the Java codecs the Kafka Java client uses
(JDK gzip, snappy-java's xerial framing, zstd-jni, lz4-java frames), decompressed by
proto.compression. The jars come with pyspark; the JDK is the machine's."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    Gauge,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
)

from proto.compression import XERIAL_SNAPPY_MAGIC, CompressionType, decompress
from proto.errors import TelemetryTooLargeError

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "java" / "CompressLikeKafkaJava.java"
JARS = ("snappy-java-", "zstd-jni-", "lz4-java-")


def pyspark_jars() -> list[Path]:
    try:
        import pyspark
    except ImportError:
        return []
    jar_dir = Path(pyspark.__file__).parent / "jars"
    return [jar for jar in jar_dir.glob("*.jar") if jar.name.startswith(JARS)]


def otlp_payload() -> bytes:
    """About 60 KB of OTLP metrics: more than one 32 KiB xerial block."""
    metrics = [
        Metric(
            name=f"org.apache.kafka.producer.node.request.latency.{index}",
            gauge=Gauge(
                data_points=[
                    NumberDataPoint(
                        time_unix_nano=1_700_000_000_000_000_000 + index,
                        as_double=index * 1.5,
                        attributes=[
                            KeyValue(
                                key="node_id", value=AnyValue(string_value=str(index))
                            )
                        ],
                    )
                ]
            ),
        )
        for index in range(700)
    ]
    data = MetricsData(
        resource_metrics=[
            ResourceMetrics(scope_metrics=[ScopeMetrics(metrics=metrics)])
        ]
    )
    return data.SerializeToString()


@pytest.fixture(scope="module")
def java_outputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, Path]:
    java = shutil.which("java")
    jars = pyspark_jars()
    if java is None or len(jars) != len(JARS):
        pytest.skip("needs a JDK and pyspark's snappy-java, zstd-jni and lz4-java jars")
    work = tmp_path_factory.mktemp("java")
    payload = otlp_payload()
    (work / "payload").write_bytes(payload)
    classpath = ":".join(str(jar) for jar in jars)
    done = subprocess.run(
        [
            java,
            f"-Djava.io.tmpdir={work}",
            "-cp",
            classpath,
            str(SOURCE),
            str(work / "payload"),
            str(work),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return payload, work


@pytest.mark.parametrize(
    ("name", "codec"),
    [
        ("gzip", CompressionType.GZIP),
        ("snappy", CompressionType.SNAPPY),
        ("zstd", CompressionType.ZSTD),
        ("lz4", CompressionType.LZ4),
    ],
)
def test_java_compressed_payloads_decompress(
    java_outputs: tuple[bytes, Path], name: str, codec: CompressionType
) -> None:
    payload, work = java_outputs
    compressed = (work / name).read_bytes()
    assert decompress(codec, compressed, len(payload)) == payload
    with pytest.raises(TelemetryTooLargeError):
        decompress(codec, compressed, len(payload) - 1)
    assert MetricsData.FromString(
        decompress(codec, compressed, 1 << 20)
    ).resource_metrics


def test_java_snappy_is_xerial_framed(java_outputs: tuple[bytes, Path]) -> None:
    _, work = java_outputs
    framed = (work / "snappy").read_bytes()
    assert framed.startswith(XERIAL_SNAPPY_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01")

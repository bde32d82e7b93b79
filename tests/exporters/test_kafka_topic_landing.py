"""The topic landing's own logic, without a broker: the record format (what a plain
consumer decodes, what a reader refuses), the delivery barrier (answers wait for every
report; only the pushes whose records failed are refused), and the config's one-line
errors.  librdkafka is replaced by a producer whose reports the test releases; the broker
tests are tests/gateway/test_landing_topic.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any, cast

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from collector.app.config import ConfigError, load_config
from collector.app.landing_topic import topic_settings
from collector.net.flush import NotLanded
from exporters.kafka_topic import (
    MAX_CONTEXT_BYTES,
    TopicLanding,
    TopicRecordError,
    TopicSettings,
    decode_record,
    encode_headers,
)
from exporters.kafka_topic.topic import too_small
from exporters.landing.format import encode_context
from tests.exporters.otlp_receiver import sample_context, sample_metrics_data


def telemetry_context(index: int) -> Any:
    """Push ``index``'s context (its correlation id)."""
    return sample_context(correlation_id=index)


class HeldProducer:
    """Takes produce() calls; a report is served by poll() once the test released it."""

    def __init__(self) -> None:
        self.produced: list[dict[str, Any]] = []
        self._callbacks: list[Callable[[KafkaError | None, Any], None]] = []
        self._released: list[tuple[int, KafkaError | None]] = []
        self.full = False

    def produce(self, topic: str, **record: Any) -> None:
        if self.full:
            raise BufferError("Local: Queue full")
        self.produced.append({"topic": topic, **record})
        self._callbacks.append(record["on_delivery"])

    def release(self, index: int, error: KafkaError | None = None) -> None:
        self._released.append((index, error))

    def poll(self, timeout: float) -> int:
        released, self._released = self._released, []
        for index, error in released:
            self._callbacks[index](error, None)
        return len(released)

    def flush(self, timeout: float) -> int:
        return 0


def landing(producer: HeldProducer) -> TopicLanding:
    settings = TopicSettings(topic="telemetry", client={"bootstrap.servers": "x:9092"})
    return TopicLanding(
        settings, asyncio.get_running_loop(), refusal=NotLanded, producer=producer
    )


def test_the_record_is_plain_otlp_with_the_context_in_a_header() -> None:
    context = telemetry_context(7)
    payload = sample_metrics_data().SerializeToString()
    headers = encode_headers(context)
    assert headers == [("ktc.format", b"1"), ("ktc.context", encode_context(context))]
    # What docs/landing-log.md tells a plain consumer to do.
    encoded = dict(headers)["ktc.context"]
    assert encoded is not None
    fields = json.loads(encoded)
    assert fields["client_instance_id"] == context.client_instance_id
    assert fields["correlation_id"] == 7
    assert decode_record(headers, payload) == (context, payload)


@pytest.mark.parametrize(
    ("headers", "problem"),
    [
        (None, "ktc.format"),
        ([("ktc.format", b"2"), ("ktc.context", b"{}")], "ktc.format"),
        ([("ktc.format", b"1")], "ktc.context"),
        ([("ktc.format", b"1"), ("ktc.context", b"x" * 70_000)], "ktc.context"),
        ([("ktc.format", b"1"), ("ktc.context", b"{not json")], "ktc.context"),
        ([("ktc.format", b"1"), ("ktc.context", b'{"client_id": 1}')], "ktc.context"),
    ],
)
def test_a_record_not_in_format_1_is_refused_in_one_line(
    headers: Any, problem: str
) -> None:
    with pytest.raises(TopicRecordError, match=problem) as refused:
        decode_record(headers, b"")
    assert "\n" not in str(refused.value)


async def test_answers_wait_for_every_report_before_them() -> None:
    producer = HeldProducer()
    topic = landing(producer)
    assert topic.pending_delivery() is None  # nothing outstanding: answer at once
    for index in range(3):
        context = telemetry_context(index)
        assert topic.export(context, b"payload-%d" % index).ok
    record = producer.produced[1]
    assert record["key"] == telemetry_context(1).client_instance_id
    assert record["value"] == b"payload-1"
    first = topic.pending_delivery()  # waits for records 0..2
    assert first is not None
    producer.release(0)
    producer.release(2)
    topic._poll()
    assert not first.done()  # record 1 has no report yet
    assert topic.export(telemetry_context(3), b"payload-3").ok
    second = topic.pending_delivery()  # waits for records 0..3
    assert second is not None
    producer.release(1)
    topic._poll()
    assert first.done() and first.exception() is None
    assert not second.done()
    producer.release(3)
    topic._poll()
    assert second.done() and second.exception() is None
    assert topic.pending_delivery() is None
    assert topic.records_delivered == 4


async def test_only_the_pushes_whose_records_failed_are_refused() -> None:
    producer = HeldProducer()
    topic = landing(producer)
    for index in range(3):
        topic.export(telemetry_context(index), b"p")
    waiting = topic.pending_delivery()
    assert waiting is not None
    producer.release(0)
    producer.release(2)
    producer.release(1, KafkaError(KafkaError._MSG_TIMED_OUT))
    topic._poll()
    error = waiting.exception()
    assert isinstance(error, NotLanded)
    assert [c.correlation_id for c, _ in error.records] == [1]
    assert "timed out" in str(error).lower()
    assert topic.unwritable is not None and "timed out" in topic.unwritable.lower()
    # The next delivery that succeeds makes the topic writable again.
    topic.export(telemetry_context(4), b"p")
    producer.release(3)
    topic._poll()
    assert topic.unwritable is None
    assert topic.records_failed == 1


async def test_a_full_producer_queue_refuses_the_push_as_retriable() -> None:
    producer = HeldProducer()
    topic = landing(producer)
    producer.full = True
    result = topic.export(telemetry_context(0), b"p")
    assert not result.ok and result.retriable  # answered 89
    assert topic.pending_delivery() is None  # nothing was produced


def test_the_config_names_what_is_missing_in_one_line() -> None:
    with pytest.raises(ConfigError, match="landing.kafka.bootstrap.servers") as missing:
        load_config(environ={}, overrides={"landing.kafka.topic": "t"})
    assert "\n" not in str(missing.value)
    with pytest.raises(ConfigError, match="landing.kafka.sasl") as login:
        load_config(
            environ={},
            overrides={
                "landing.kafka.topic": "t",
                "landing.kafka.bootstrap.servers": "k:9092",
                "landing.kafka.security.protocol": "SASL_SSL",
            },
        )
    assert "\n" not in str(login.value)


def test_the_gateway_lands_on_the_fronted_cluster_with_its_login() -> None:
    config = load_config(
        environ={},
        overrides={
            "landing.kafka.topic": "t",
            "gateway.upstream.bootstrap.servers": "k1:9092,k2:9092",
            "gateway.upstream.security.protocol": "SASL_SSL",
            "gateway.upstream.sasl.mechanism": "SCRAM-SHA-512",
            "gateway.upstream.sasl.username": "ktc",
            "gateway.upstream.sasl.password": "ktc-secret",
            "gateway.upstream.ssl.truststore.location": "/etc/ktc/ca.pem",
        },
    )
    settings = topic_settings(config)
    assert settings.client == {
        "bootstrap.servers": "k1:9092,k2:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "ktc",
        "sasl.password": "ktc-secret",
        "ssl.endpoint.identification.algorithm": "https",
        "ssl.ca.location": "/etc/ktc/ca.pem",
    }
    producer = settings.producer_config()
    assert producer["enable.idempotence"] is True and producer["acks"] == "all"
    assert producer["message.max.bytes"] == 1_114_198  # telemetry.max.bytes 1 MiB


def test_a_push_of_telemetry_max_bytes_passes_librdkafkas_size_check() -> None:
    """librdkafka's own produce() check (no broker needed: it refuses before queueing),
    with the largest record a push makes: a value of telemetry.max.bytes, a 22-character
    key and a context header of the 64 KiB a reader takes.  One byte more is refused, so
    the bound is exact; librdkafka's default message.max.bytes refuses it."""
    settings = TopicSettings(topic="t", client={"bootstrap.servers": "127.0.0.1:9"})
    key = telemetry_context(0).client_instance_id
    headers: list[tuple[str, str | bytes | None]] = [
        ("ktc.format", b"1"),
        ("ktc.context", b"x" * MAX_CONTEXT_BYTES),
    ]
    value = b"v" * settings.telemetry_max_bytes
    producer = Producer(settings.producer_config())
    default = Producer({"bootstrap.servers": "127.0.0.1:9", "log_level": 0})
    try:
        producer.produce("t", value=value, key=key, headers=headers)
        with pytest.raises(KafkaException) as larger:
            producer.produce("t", value=value + b"v", key=key, headers=headers)
        assert larger.value.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
        with pytest.raises(KafkaException) as refused:
            default.produce("t", value=value, key=key, headers=headers)
        assert refused.value.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    finally:
        producer.purge()
        default.purge()
    assert settings.topic_max_message_bytes == 1_114_198 + 61  # one record's batch
    # A small telemetry.max.bytes keeps librdkafka's batches (1,000,000) as they are.
    small = TopicSettings(topic="t", client={}, telemetry_max_bytes=10_000)
    assert small.message_max_bytes == 1_000_000
    assert small.topic_max_message_bytes == 1_000_061


def test_a_topic_too_small_is_named_in_one_line() -> None:
    settings = TopicSettings(topic="telemetry", client={})
    assert too_small(settings, 1_114_259, from_broker=False) is None
    broker = too_small(settings, 1_048_588, from_broker=True)
    assert broker == (
        "topic telemetry has max.message.bytes 1048588 (the broker's "
        "message.max.bytes, the topic sets none); a push of telemetry.max.bytes "
        "(1048576) needs at least 1114259: raise the topic's max.message.bytes or "
        "lower telemetry.max.bytes"
    )
    topic = too_small(settings, 1_114_258, from_broker=False)
    assert topic is not None and "(set on the topic)" in topic and "\n" not in topic


async def test_a_push_no_record_can_hold_is_refused_for_good() -> None:
    """Not 89 (push again): the same push would be refused on every interval."""
    producer = HeldProducer()
    topic = landing(producer)
    # A context longer than a reader takes (a 64 KiB client id).
    result = topic.export(sample_context(client_id="c" * MAX_CONTEXT_BYTES), b"p")
    assert not result.ok and not result.retriable
    assert result.error is not None and "more than a reader takes" in result.error
    too_large = KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))

    def refuse(topic_name: str, **record: Any) -> None:
        raise too_large

    producer.produce = refuse  # type: ignore[method-assign,assignment]
    result = topic.export(telemetry_context(1), b"p")
    assert not result.ok and not result.retriable
    assert topic.pending_delivery() is None  # nothing was produced
    assert topic.records_failed == 2


class FakeMessage:
    def __init__(self, partition: int, offset: int, headers: Any) -> None:
        self._partition = partition
        self._offset = offset
        self._headers = headers

    def error(self) -> None:
        return None

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def headers(self) -> Any:
        return self._headers

    def value(self) -> bytes:
        return b"payload"

    def timestamp(self) -> tuple[int, int]:
        return (1, 1_763_700_000_000)


class FakeConsumer:
    def __init__(self, messages: list[FakeMessage]) -> None:
        self.messages = messages
        self.commits: list[dict[int, int]] = []

    def consume(self, num_messages: int, timeout: float) -> list[FakeMessage]:
        taken, self.messages = (
            self.messages[:num_messages],
            self.messages[num_messages:],
        )
        return taken

    def commit(self, offsets: list[Any], asynchronous: bool) -> None:
        self.commits.append({tp.partition: tp.offset for tp in offsets})

    def close(self) -> None:
        pass


def topic_source(messages: list[FakeMessage]) -> tuple[Any, FakeConsumer]:
    from exporters.kafka_topic import TopicSource

    settings = TopicSettings(topic="t", client={"bootstrap.servers": "127.0.0.1:9"})
    source = TopicSource(settings, "g")
    source._consumer.close()
    fake = FakeConsumer(messages)
    source._consumer = cast(Consumer, fake)  # the librdkafka consumer's stand-in
    return source, fake


def ours(index: int) -> list[tuple[str, bytes]]:
    return [
        ("ktc.format", b"1"),
        ("ktc.context", encode_context(telemetry_context(index))),
    ]


def test_the_forwarders_source_commits_per_partition_what_was_delivered() -> None:
    messages = [
        FakeMessage(0, 10, ours(0)),
        FakeMessage(1, 5, ours(1)),
        FakeMessage(0, 11, [("ktc.format", b"9")]),  # not ours: skipped, committed
        FakeMessage(1, 6, ours(3)),
    ]
    source, consumer = topic_source(messages)
    assert source.end_offset() == 4
    read = list(source.read(0))
    assert [r.offset for r in read] == [0, 1, 2]  # numbers stay dense
    assert [r.context.correlation_id for r in read] == [0, 1, 3]
    assert read[0].appended_time_unix_nano == 1_763_700_000_000 * 1_000_000
    source.commit(2)  # the first two delivered: the skipped one goes with the second
    source.commit(3)
    assert consumer.commits == [{0: 12, 1: 6}, {1: 7}]
    assert source.records_skipped == 1


def test_a_revoked_partitions_unread_records_are_never_committed_here() -> None:
    from confluent_kafka import TopicPartition

    messages = [FakeMessage(0, 10, ours(0)), FakeMessage(1, 5, ours(1))]
    source, consumer = topic_source(messages)
    source.end_offset()
    source._revoked(None, [TopicPartition("t", 1)])  # partition 1 went elsewhere
    read = list(source.read(0))
    assert [r.offset for r in read] == [0]
    source.commit(1)
    assert consumer.commits == [{0: 11}]  # partition 1's offset 5 is its new owner's


def test_a_gateway_without_a_login_of_its_own_cannot_produce_to_a_sasl_cluster() -> (
    None
):
    with pytest.raises(ConfigError, match="needs a login") as refused:
        load_config(
            environ={},
            overrides={
                "landing.kafka.topic": "t",
                "gateway.upstream.bootstrap.servers": "k1:9092",
                "gateway.upstream.security.protocol": "SASL_PLAINTEXT",
            },
        )
    assert "\n" not in str(refused.value)


def test_a_client_setting_librdkafka_refuses_stops_the_start_in_one_line(
    tmp_path: Any,
) -> None:
    from exporters.kafka_topic import ensure_topic
    from exporters.kafka_topic.topic import TopicUnavailable

    missing = str(tmp_path / "missing-ca.pem")
    settings = TopicSettings(
        topic="t",
        client={
            "bootstrap.servers": "127.0.0.1:9",
            "security.protocol": "SSL",
            "ssl.ca.location": missing,
        },
    )
    with pytest.raises(TopicUnavailable, match="ssl.ca.location") as refused:
        ensure_topic(settings)
    assert "\n" not in str(refused.value)

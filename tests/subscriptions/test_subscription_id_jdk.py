"""Ground truth from the JDK: our HashSet/ConcurrentHashMap/CRC32C port against the real thing.

SubscriptionIdOracle.java (beside this file) is compiled and run at test time; it builds
the merged metrics set with java.util.concurrent.ConcurrentHashMap and java.util.HashSet
exactly as Kafka's ClientMetricsManager does and prints ``toString() + interval``, the
java.util.zip.CRC32C and the id. Thousands of generated cases must agree to the byte.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from subscriptions.effective import resolve
from subscriptions.matching import ClientMetadata
from subscriptions.model import Subscription

ORACLE_SOURCE = Path(__file__).with_name("SubscriptionIdOracle.java")
CASES = 3000
SEED = 714

# Strings built from "Aa"/"BB" blocks share one String.hashCode ("Aa" = "BB" = 2112), so
# they always share a bucket: they exercise insertion order, treeification (9+ in a
# bucket once the table has 64+ buckets) and the ConcurrentHashMap transfer reversal.
COLLIDING = [
    "".join(blocks)
    for blocks in (
        [a, b, c, d]
        for a in ("Aa", "BB")
        for b in ("Aa", "BB")
        for c in ("Aa", "BB")
        for d in ("Aa", "BB")
    )
]
REALISTIC = [
    "org.apache.kafka.producer.",
    "org.apache.kafka.consumer.",
    "org.apache.kafka.consumer.coordinator.",
    "org.apache.kafka.producer.node.request.latency.avg",
    "org.apache.kafka.consumer.fetch.manager.fetch.latency.max",
    "org.apache.kafka.stream.",
    "org.apache.",
]
UNUSUAL = [
    "métrique.",
    "指标.延迟",
    "emoji.😀.",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "a b",
    "tab\tname",
    "\u00a0nbsp",
    "Ω",
]
INTERVALS = [100, 1000, 5000, 30000, 60000, 299999, 300000, 300001, 600000, 3600000]


def _random_name(rng: random.Random) -> str:
    alphabet = "abcdefghijklmnopqrstuvwxyz.ABCXYZ0123456789_-"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30)))


def _metric_pool(rng: random.Random) -> list[str]:
    pool = REALISTIC + UNUSUAL + rng.sample(COLLIDING, rng.randint(0, len(COLLIDING)))
    pool += [_random_name(rng) for _ in range(rng.randint(0, 120))]
    return list(dict.fromkeys(pool))


@dataclass(frozen=True)
class Case:
    instance_id: uuid.UUID
    subscriptions: tuple[Subscription, ...]
    matched: tuple[bool, ...]


def _generate(rng: random.Random) -> Case:
    if rng.random() < 0.2:
        return _generate_map_order_probe(rng)
    pool = _metric_pool(rng)
    many = rng.random() < 0.15  # enough subscriptions to resize (and treeify) the map
    count = rng.randint(20, 80) if many else rng.randint(0, 6)
    names = rng.sample(COLLIDING, rng.randint(0, 16)) if rng.random() < 0.5 else []
    names += [_random_name(rng) for _ in range(count)] + [
        "sub-" + str(i) for i in range(3)
    ]
    names = list(dict.fromkeys(names))[: max(count, 1)]
    subscriptions = []
    matched = []
    for name in names:
        size = rng.choice([0, 1, 2, 3, 5, 8, 13, 20, 40, 70, 100])
        metrics = rng.sample(pool, min(size, len(pool)))
        if many:
            # colliding names spread over many subscriptions: their order in the merged
            # set is the order of the subscriptions in the ConcurrentHashMap
            metrics += rng.sample(COLLIDING, 2)
        if rng.random() < 0.05:
            metrics.append("*")
        is_matched = rng.random() < 0.8
        subscriptions.append(
            Subscription(
                name=name,
                metrics=tuple(dict.fromkeys(metrics)),
                interval_ms=rng.choice(INTERVALS),
                match=() if is_matched else (("client_id", "nobody"),),
            )
        )
        matched.append(is_matched)
    return Case(
        uuid.UUID(int=rng.getrandbits(128)), tuple(subscriptions), tuple(matched)
    )


def _generate_map_order_probe(rng: random.Random) -> Case:
    """Up to 8 subscriptions each add one name of a colliding family, so those names share
    one bucket of the merged set (a list, below the treeify threshold) and come out in
    exactly the ConcurrentHashMap order of their subscriptions."""
    names = list(
        dict.fromkeys(
            rng.sample(COLLIDING, rng.randint(0, 16))
            + [_random_name(rng) for _ in range(rng.randint(9, 80))]
        )
    )
    carriers = set(rng.sample(range(len(names)), min(8, len(names))))
    family = iter(rng.sample(COLLIDING, len(COLLIDING)))
    subscriptions = tuple(
        Subscription(
            name=name,
            metrics=(next(family),) if i in carriers else (_random_name(rng),),
            interval_ms=rng.choice(INTERVALS),
        )
        for i, name in enumerate(names)
    )
    return Case(
        uuid.UUID(int=rng.getrandbits(128)), subscriptions, (True,) * len(subscriptions)
    )


def _encode(text: str) -> str:
    return "x" + text.encode("utf-8").hex()


def _case_line(case: Case) -> str:
    msb = to_int64(case.instance_id.int >> 64)
    lsb = to_int64(case.instance_id.int & 0xFFFFFFFFFFFFFFFF)
    parts = [str(msb), str(lsb), str(len(case.subscriptions))]
    for subscription, is_matched in zip(case.subscriptions, case.matched, strict=True):
        parts += [
            _encode(subscription.name),
            str(subscription.interval_ms),
            "1" if is_matched else "0",
            str(len(subscription.metrics)),
        ]
        parts += [_encode(metric) for metric in subscription.metrics]
    return " ".join(parts)


def to_int64(value: int) -> int:
    return value - (1 << 64) if value & (1 << 63) else value


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    javac, java = shutil.which("javac"), shutil.which("java")
    if javac is None or java is None:
        pytest.fail(
            "the JDK ground-truth test needs `javac` and `java` (JDK 17) on PATH"
        )
    workdir = tmp_path_factory.mktemp("oracle")
    shutil.copy(ORACLE_SOURCE, workdir / ORACLE_SOURCE.name)
    subprocess.run([javac, ORACLE_SOURCE.name], cwd=workdir, check=True, timeout=120)
    return workdir


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    rng = random.Random(SEED)
    return [_generate(rng) for _ in range(CASES)]


def test_subscription_ids_match_the_jdk(oracle: Path, cases: list[Case]) -> None:
    completed = subprocess.run(
        ["java", "-Xshare:auto", "-cp", str(oracle), "SubscriptionIdOracle"],
        input="\n".join(_case_line(case) for case in cases) + "\n",
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=True,
        timeout=120,
    )
    lines = completed.stdout.splitlines()
    assert len(lines) == len(cases)
    metadata = ClientMetadata(client_instance_id="unused", client_id="somebody")
    mismatches = []
    for index, (case, line) in enumerate(zip(cases, lines, strict=True)):
        hashed_hex, _crc, java_id = line.split(" ")
        java_hashed = bytes.fromhex(hashed_hex[1:]).decode("utf-8")
        effective = resolve(case.subscriptions, metadata, case.instance_id)
        ours = (
            "[" + ", ".join(effective.metrics) + "]" + str(effective.push_interval_ms)
        )
        if ours != java_hashed or effective.subscription_id != int(java_id):
            mismatches.append((index, ours[:200], java_hashed[:200]))
    assert not mismatches, (
        f"{len(mismatches)} of {len(cases)} cases differ, first: {mismatches[:3]}"
    )


def test_the_generator_makes_the_hard_cases(cases: list[Case]) -> None:
    """The generator really produces the hard shapes (else the comparison proves little)."""
    assert (
        sum(len(case.subscriptions) >= 24 for case in cases) > 100
    )  # CHM resized twice
    colliding = set(COLLIDING)
    assert (
        sum(
            any(len(colliding & set(s.metrics)) >= 9 for s in case.subscriptions)
            for case in cases
        )
        > 100
    )  # a HashSet bucket with 9+ entries
    assert (
        sum(any(len(s.metrics) >= 70 for s in case.subscriptions) for case in cases)
        > 500
    )
    assert any(any("*" in s.metrics for s in case.subscriptions) for case in cases)

"""Cost of resolving a client's subscription, against a naive merge measured in the same run.

Run: ``python tests/perf/bench_subscriptions.py [--clients N] [--strict]``

The collector resolves a subscription once per new client instance (and for every
instance after a subscription change). Cases, with 10 subscriptions of 20 metric
prefixes each, 6 of which match the client:

* naive merge (baseline) - Python set union, sorted, CRC32C: what a port that ignores
                           Java's order would cost
* resolve, warm          - ``subscriptions.resolve`` for a new instance id, subscriptions
                           unchanged (merged order cached; the usual case)
* resolve, cold          - the same right after a subscription change (caches cleared):
                           full Java HashSet and ConcurrentHashMap modelling

Targets: warm <= 20 us and cold <= 1 ms per client; ``--strict`` exits 1 on a miss.
Times are this thread's CPU time, best of several runs.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import crc32c

from subscriptions import effective
from subscriptions.matching import ClientMetadata, matches
from subscriptions.model import Subscription

TARGET_WARM_US = 20.0
TARGET_COLD_US = 1000.0

SUBSCRIPTIONS = [
    Subscription.from_configs(
        f"sub-{n}",
        {
            "metrics": ",".join(
                f"org.apache.kafka.group{n}.metric{m}." for m in range(20)
            ),
            "interval.ms": str(10_000 + n),
            "match": "client_software_name=librdkafka"
            if n % 5 < 3
            else "client_id=nobody",
        },
    )
    for n in range(10)
]
CLIENT = ClientMetadata(
    client_instance_id="VQQTF4UpT8qqtooenFFlgA",
    client_id="app-1",
    client_software_name="librdkafka",
    client_software_version="2.16.0",
)


def naive(instance_id: uuid.UUID) -> int:
    matched = [s for s in SUBSCRIPTIONS if matches(s, CLIENT)]
    metrics = sorted({m for s in matched for m in s.metrics})
    interval = min([300000, *(s.interval_ms for s in matched)])
    return crc32c.crc32c(
        ("[" + ", ".join(metrics) + "]" + str(interval)).encode()
    ) ^ hash(instance_id)


def warm(instance_id: uuid.UUID) -> int:
    return effective.resolve(SUBSCRIPTIONS, CLIENT, instance_id).subscription_id


def cold(instance_id: uuid.UUID) -> int:
    effective.merge.cache_clear()
    effective._set_order.cache_clear()
    effective._name_order.cache_clear()
    return effective.resolve(SUBSCRIPTIONS, CLIENT, instance_id).subscription_id


def per_call_us(
    call: Callable[[uuid.UUID], int], clients: int, repeats: int = 5
) -> float:
    ids = [uuid.uuid4() for _ in range(clients)]
    best = float("inf")
    for _ in range(repeats):
        start = time.thread_time_ns()
        for instance_id in ids:
            call(instance_id)
        best = min(best, (time.thread_time_ns() - start) / clients / 1000)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=2000)
    parser.add_argument("--strict", action="store_true")
    args = parser.parse_args()

    baseline = per_call_us(naive, args.clients)
    results = {
        "naive merge (baseline)": baseline,
        "resolve, warm": per_call_us(warm, args.clients),
        "resolve, cold": per_call_us(cold, max(args.clients // 10, 50)),
    }
    for name, us in results.items():
        print(f"{name:24s} {us:9.2f} us/client   {us / baseline:6.2f}x baseline")
    missed = (
        results["resolve, warm"] > TARGET_WARM_US
        or results["resolve, cold"] > TARGET_COLD_US
    )
    if missed:
        print(
            f"target missed: warm <= {TARGET_WARM_US} us, cold <= {TARGET_COLD_US} us"
        )
    return 1 if missed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())

"""The gateway's Python per forwarded request and response, in a tight loop without sockets.

One client pair of a real ``Gateway`` (its filter chains, quota engine and topology) with a
produce and request quota configured that never limits (as tests/perf/bench_gateway.py
configures the gateway it starts), fed the frames a librdkafka producer sends at the latency
phase of that benchmark: Produce v11, acks=1, one 1 KiB record batch, and the broker's
Produce v11 response (no NodeEndpoints).  Per iteration: the request through the pair's
``handle`` (header already read, as the network layer hands it over: the chain's request
filters, the produce-bytes quota, forwarding to an upstream that only counts frames) and the
response through ``upstream_response`` (the chain's response filters, the address walk of a
Produce v10+ response, the request-time quota, the answer bookkeeping).

What it leaves out, and bench_gateway.py measures: the event loop, the system calls, the
network layer's framing, and a process idle between requests (cold caches).

Run: ``.venv/bin/python tests/perf/bench_gateway_pair.py [--iterations N] [--repeats R]``;
prints the best of R runs of N iterations, this thread's CPU time per request+response.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from clock.testing import FakeClock
from collector.core.session import Session
from collector.gateway.admin_split import AdminSplitter
from collector.gateway.forwarded_quotas import GatewayQuotas
from collector.gateway.service import Gateway
from collector.gateway.topology import Topology
from collector.pipeline.quota_enforcer import QuotaEnforcer
from proto import ApiKeys, ServerConnection, encode_request, encode_response
from proto.messages import ProduceRequest, ProduceResponse
from proto.messages import produce_request as pr
from proto.messages import produce_response as presp
from quota import QuotaEngine
from subscriptions.store import ConfigStore

CLIENT_ID = "bench-latency"
VERSION = 11


class Channel:
    def mute(self) -> None: ...
    def unmute(self) -> None: ...
    def hold_reading(self, held: bool) -> None: ...
    def close_for(self, reason: str, quiet: bool = False) -> None:
        raise AssertionError(reason)


class Upstream:
    def __init__(self) -> None:
        self.frames = 0

    def send_frame(self, raw: bytes) -> None:
        self.frames += 1

    def hold(self, held: bool) -> None: ...
    def close(self) -> None: ...


def make_gateway(data_dir: Path, clock: FakeClock) -> Any:
    store = ConfigStore(data_dir)
    store.alter_quotas(
        {"client-id": CLIENT_ID},
        {"producer_byte_rate": 1e9, "request_percentage": 1_000_000.0},
    )
    engine = QuotaEngine.from_config({}, clock.now_ms())
    enforcer = QuotaEnforcer(engine, clock=clock)
    enforcer.apply_entity_quotas(store.snapshot().quotas)
    topology = Topology(
        bootstrap=[("127.0.0.1", 9092)],
        broker_port_start=0,
        min_node_id=0,
        max_nodes=16,
        advertised_host="127.0.0.1",
        bind_node=lambda node_id, port: 19000 + node_id,
        state_dir=data_dir,
    )
    settings: dict[str, Any] = {
        "dispatcher": None,
        "quotas": GatewayQuotas(enforcer),
        "admin": AdminSplitter(None, 100 * 1024 * 1024),
        "open_upstream": None,
        "discover": None,
    }
    parameters = inspect.signature(Gateway).parameters
    if "clock" in parameters:
        settings["clock"] = clock
    else:  # the gateway before it took the node's clock
        settings["clock_ms"] = clock.now_ms
    if "local_api_versions" in parameters:  # before the gateway derived them
        settings["local_api_versions"] = {}
    if "topology" in parameters:  # the gateway before its filter table
        settings["topology"] = topology
    if "authentication" in parameters:
        from collector.gateway.authentication import AuthenticationPolicy

        # A cluster without SASL, as bench_gateway.py's PLAINTEXT one.
        policy = AuthenticationPolicy(
            upstream_security_protocol="PLAINTEXT", require_when_unknown=True
        )
        policy.learned_not_required("the benchmark's cluster has no SASL listener")
        settings["authentication"] = policy
    gateway = Gateway(**settings)
    gateway.topology = topology
    return gateway


def frames() -> tuple[Any, bytes]:
    request = ProduceRequest(
        acks=1,
        timeout_ms=30_000,
        topic_data=(
            pr.TopicProduceData(
                name="bench-latency",
                partition_data=(pr.PartitionProduceData(index=0, records=b"r" * 1024),),
            ),
        ),
    )
    codec = ServerConnection()
    codec.receive_data(encode_request(ApiKeys.PRODUCE, VERSION, 1, CLIENT_ID, request))
    frame = codec.next_request()
    assert frame is not None
    response = ProduceResponse(
        responses=(
            presp.TopicProduceResponse(
                name="bench-latency",
                partition_responses=(
                    presp.PartitionProduceResponse(index=0, base_offset=42),
                ),
            ),
        )
    )
    payload = encode_response(ApiKeys.PRODUCE, VERSION, 1, response)[4:]
    return frame, payload


def run(iterations: int) -> float:
    clock = FakeClock()
    with tempfile.TemporaryDirectory(prefix="ktc-bench-pair-") as tmp:
        gateway = make_gateway(Path(tmp), clock)
        pair = gateway.new_pair(None)
        channel = Channel()
        session = Session(1, "PLAINTEXT", "PLAINTEXT")
        pair.channel, pair.session = channel, session
        upstream = Upstream()
        pair.upstream_ready(upstream)
        frame, payload = frames()
        handle = pair.handle
        respond = pair.upstream_response
        started = time.thread_time_ns()
        for _ in range(iterations):
            handle(frame, session, channel)
            respond(payload)
        elapsed = time.thread_time_ns() - started
        assert upstream.frames == iterations and pair.in_flight == 0
    return elapsed / iterations / 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    runs = [run(args.iterations) for _ in range(args.repeats)]
    print(
        f"gateway pair, Produce v{VERSION} acks=1 request + response: "
        f"{min(runs):.2f} us CPU (best of {args.repeats} x {args.iterations}; "
        f"median {sorted(runs)[len(runs) // 2]:.2f} us)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

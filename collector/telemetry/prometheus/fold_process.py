"""``/metrics/clients`` folded in a process of its own, so the push path's CPU is its own.

A thread of the node's interpreter that reads and folds what landed does not run on the
event loop, but it takes the loop's CPU and the interpreter's lock: measured with the
fold in a thread, the push path's peak was a third of its peak with the endpoint off
(docs/prometheus.md).  So the node starts one child process (this module, ``python -m``)
that reads the landing log directory itself (``landed.py``: what landed, never what was
staged), folds it with the same code (``ClientSeries``) and builds the page; the node's
side (:class:`FoldProcess`) only asks for it.

| request (node -> child) | the child | reply |
|---|---|---|
| ``fold``, every second | reads and folds what landed since its last read | its counters |
| ``held``, at a scrape | the same for ``SCRAPE_CATCH_UP_S`` at most, then lists the instances it holds | their ids |
| ``render``, at a scrape | forgets the ids the node says it no longer caches (closed, expired, evicted), folds one batch more of what landed at most, expires, builds the page | its counters and the page |

Each request carries the node's clock (``now_ms``: the injected clock, as in-process) and,
with group commit, the landing log's durable offset (the child reads below it only).  The
node asks from one worker thread (its requests never interleave); that thread waits on a
pipe, releasing the interpreter's lock, and checks the ``held`` ids against the manager's
cache, one dictionary lookup each, as the in-process fold did.

Framing, both ways: a 4-byte big-endian length and a JSON object; a ``render`` reply is
followed by a 4-byte length and the page's bytes.  The child exits when its stdin closes
(the node closed it, or died).

What the child reads is the config's ``source``:

| source | reads | what differs |
|---|---|---|
| ``log`` (the default) | the landing log's directory from ``start_offset`` (``landed.py``) | nothing: every record is this node's |
| ``topic`` | every partition of the landing topic (``landed_topic.py``) | the child answers the config with ``{"start_offsets": ...}``, which the node waits for (a restarted child is given them, so it folds again everything read since the node started); the topic holds every replica's pushes, so before folding a record of an instance it does not hold the child asks the node (``{"ask": [ids]}``, answered ``{"cached": [ids]}`` from the manager's cache) and skips the records of the instances this node does not cache |
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import os
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Final

from prometheus_client.core import CounterMetricFamily, Metric

from clock import SYSTEM_CLOCK, Clock
from collector.telemetry.prometheus.budget import Selection
from collector.telemetry.prometheus.client_series import (
    ClientSeries,
    ClientSeriesClosed,
    ClientSeriesSettings,
)
from collector.telemetry.prometheus.landed import Landed, LandedRecords
from exporters.context import TelemetryContext
from exporters.kafka_topic.settings import TopicSettings

__all__ = ["FOLD_NICE", "FoldProcess", "main"]

log = logging.getLogger(__name__)

_LENGTH = struct.Struct(">I")
# How long a closing node waits for the child to exit before killing it.
_EXIT_WAIT_S: Final = 5.0
# The counters the child reports with every reply (ClientSeries attributes).
_COUNTERS: Final = (
    "instances_forgotten",
    "last_scrape_seconds",
    "type_conflicts",
    "undecodable",
    "series_refused",
    "series_expired",
    "capped_instances",
    "capped_ids",
    "pushes_folded",
)


def _write(
    stream: IO[bytes], message: dict[str, Any], body: bytes | None = None
) -> None:
    encoded = json.dumps(message).encode()
    parts = [_LENGTH.pack(len(encoded)), encoded]
    if body is not None:
        parts += [_LENGTH.pack(len(body)), body]
    stream.write(b"".join(parts))
    stream.flush()


def _read_exactly(stream: IO[bytes], size: int) -> bytes | None:
    data = stream.read(size)
    if data is None or len(data) < size:
        return None
    return data


def _read_frame(stream: IO[bytes]) -> bytes | None:
    head = _read_exactly(stream, _LENGTH.size)
    if head is None:
        return None
    return _read_exactly(stream, _LENGTH.unpack(head)[0])


def _read(stream: IO[bytes]) -> dict[str, Any] | None:
    frame = _read_frame(stream)
    return None if frame is None else dict(json.loads(frame))


def _settings_json(settings: ClientSeriesSettings) -> dict[str, Any]:
    return {
        "max_series": settings.max_series,
        "labels": list(settings.labels),
        "metric_prefixes": list(settings.metric_prefixes),
        "max_series_per_instance": settings.max_series_per_instance,
        "series_expiry_ms": settings.series_expiry_ms,
    }


def _topic_json(settings: TopicSettings) -> dict[str, Any]:
    return {
        "topic": settings.topic,
        "client": dict(settings.client),
        "partitions": settings.partitions,
        "replication_factor": settings.replication_factor,
        "delivery_timeout_ms": settings.delivery_timeout_ms,
        "forwarder_group": settings.forwarder_group,
        "telemetry_max_bytes": settings.telemetry_max_bytes,
    }


def _counters(series: ClientSeries) -> dict[str, Any]:
    selection = series.last_selection
    counters: dict[str, Any] = {name: getattr(series, name) for name in _COUNTERS}
    counters["selection"] = [
        selection.samples,
        selection.overflow_instances,
        selection.dropped_samples,
    ]
    return counters


class FoldProcess(ClientSeries):
    """The node's side of ``/metrics/clients`` when the fold runs in a child process: the
    interface of :class:`ClientSeries` (``fold_soon``, ``scrape``, ``collect``, ``close``),
    each answered by the child reading the landing log in ``directory`` from
    ``start_offset`` on (below ``durable_below()`` when given), or the landing ``topic``
    from its end offsets when the child first started.

    With the log, the child starts at the first scrape, or at the first fold once
    ``next_offset()`` (the log's) has moved past ``start_offset``: a node no client pushed
    to runs no child, and one started later reads from ``start_offset`` all the same.  With
    the topic it starts at once: where it starts reading is the topic's end then."""

    def __init__(
        self,
        settings: ClientSeriesSettings,
        is_cached: Callable[[str], bool],
        *,
        directory: Path | None = None,
        start_offset: int = 0,
        durable_below: Callable[[], int] | None = None,
        topic: TopicSettings | None = None,
        next_offset: Callable[[], int] | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        super().__init__(settings, is_cached, clock=clock)
        self._durable_below = durable_below
        self._next_offset = next_offset
        self._start_offset = start_offset
        self._config: dict[str, Any]
        if topic is not None:
            self._config = {
                "source": "topic",
                "topic": _topic_json(topic),
                "start_offsets": None,
            }
        else:
            assert directory is not None, "a landing log directory or a topic"
            self._config = {
                "source": "log",
                "directory": str(directory),
                "start_offset": start_offset,
                "bounded": durable_below is not None,
            }
        self._config["settings"] = _settings_json(settings)
        self.restarts = 0
        self._process: subprocess.Popen[bytes] | None = None
        if topic is not None:
            self._start()

    def _start(self) -> subprocess.Popen[bytes]:
        """A child folding from the start offset (a restarted one folds again every
        record landed since, so its sums are those of a child that never stopped)."""
        self._process = subprocess.Popen(
            [sys.executable, "-m", __name__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        self._to_child: IO[bytes] = self._process.stdin  # type: ignore[assignment]
        self._from_child: IO[bytes] = self._process.stdout  # type: ignore[assignment]
        _write(self._to_child, self._config)
        if self._config["source"] == "topic":
            # Where the child started reading: what lands from now on is folded (the
            # node waits for it, as it reads the log's next offset before serving).
            started = _read(self._from_child)
            if started is None:
                # It could not read the topic's offsets (its log line says why): the
                # next request starts another, as after any death of the child.
                log.warning(
                    "the /metrics/clients fold process could not start (code %s)",
                    self._process.wait(),
                )
            elif self._config["start_offsets"] is None:
                # A restarted child folds again from where the first one started.
                self._config["start_offsets"] = started["start_offsets"]
        return self._process

    @property
    def pid(self) -> int:
        """The child's process id (it is started if it was not yet)."""
        return (self._process or self._start()).pid

    @property
    def returncode(self) -> int | None:
        """The child's exit status; None while it runs, or before it started."""
        return None if self._process is None else self._process.poll()

    def _nothing_landed_yet(self) -> bool:
        return (
            self._process is None
            and self._next_offset is not None
            and self._next_offset() <= self._start_offset
        )

    # ------------------------------------------------------------------ loop side
    def fold_soon(self) -> concurrent.futures.Future[None] | None:
        """Ask the child to fold what landed (None: the last request is still running)."""
        if self._closed or (self._folding is not None and not self._folding.done()):
            return None
        if self._nothing_landed_yet():
            return None
        self._folding = self._executor.submit(self._fold_remote, self._clock.now_ms())
        return self._folding

    async def scrape(self, open_metrics: bool) -> bytes:
        if self._closed:
            raise ClientSeriesClosed("the collector is shutting down")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._executor, self._scrape_remote, open_metrics, self._clock.now_ms()
        )

    def close(self) -> None:
        self._closed = True
        self._executor.shutdown(wait=True, cancel_futures=True)
        if self._process is None:
            return
        try:
            self._to_child.close()
        except OSError:
            pass
        try:
            self._process.wait(_EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._from_child.close()

    def collect(self) -> Iterator[Metric]:
        yield from super().collect()
        yield CounterMetricFamily(
            "ktc_prometheus_clients_fold_restarts",
            "Times the /metrics/clients fold process died and was started again",
            value=self.restarts,
        )

    # ------------------------------------------------------------------ worker side
    def _call(
        self, request: dict[str, Any], *, with_body: bool = False
    ) -> tuple[dict[str, Any], bytes]:
        if self._durable_below is not None:
            request["durable_below"] = self._durable_below()
        if self._process is None:
            self._start()
        elif self._process.poll() is not None:  # it died: the request before failed
            log.warning(
                "the /metrics/clients fold process exited (code %s): restarting it",
                self._process.returncode,
            )
            with contextlib.suppress(OSError):
                self._to_child.close()
            self._from_child.close()
            self.restarts += 1
            self._start()
        try:
            _write(self._to_child, request)
            reply = _read(self._from_child)
            while reply is not None and "ask" in reply:
                is_cached = self._is_cached
                cached = [key for key in reply["ask"] if is_cached(key)]
                _write(self._to_child, {"cached": cached})
                reply = _read(self._from_child)
            body = _read_frame(self._from_child) if with_body else b""
        except (OSError, ValueError) as exc:
            raise ClientSeriesClosed(f"the fold process failed: {exc}") from exc
        if reply is None or body is None:
            raise ClientSeriesClosed(
                f"the fold process exited (code {self.returncode})"
            )
        counters = reply.get("counters")
        if counters is not None:
            self._take_counters(counters)
        return reply, body

    def _fold_remote(self, now_ms: int) -> None:
        self._call({"op": "fold", "now_ms": now_ms})

    def _scrape_remote(self, open_metrics: bool, now_ms: int) -> bytes:
        held, _ = self._call({"op": "held", "now_ms": now_ms})
        is_cached = self._is_cached
        gone = [key for key in held["ids"] if not is_cached(key)]
        _, body = self._call(
            {
                "op": "render",
                "now_ms": now_ms,
                "gone": gone,
                "open_metrics": open_metrics,
            },
            with_body=True,
        )
        return body

    def _take_counters(self, counters: dict[str, Any]) -> None:
        for name in _COUNTERS:
            setattr(self, name, counters[name])
        selection = Selection()
        selection.samples, selection.overflow_instances, selection.dropped_samples = (
            counters["selection"]
        )
        self.last_selection = selection


# ---------------------------------------------------------------------- the child


def serve(to_node: IO[bytes], from_node: IO[bytes]) -> int:
    """The child's loop: the config first, then requests until ``from_node`` closes."""
    config = _read(from_node)
    if config is None:
        return 0
    raw = config["settings"]
    settings = ClientSeriesSettings(
        raw["max_series"],
        tuple(raw["labels"]),
        tuple(raw["metric_prefixes"]),
        raw["max_series_per_instance"],
        raw["series_expiry_ms"],
    )
    durable_below = [0]
    gone: set[str] = set()
    holds: list[Callable[[str], bool]] = []
    landed: Landed
    if config.get("source", "log") == "topic":
        from collector.telemetry.prometheus.landed_topic import LandedTopicUnavailable

        try:
            landed = _topic_source(
                config, to_node, from_node, lambda key: holds[0](key)
            )
        except LandedTopicUnavailable as exc:
            log.warning("the /metrics/clients fold cannot start: %s", exc)
            return 1
    else:
        landed = LandedRecords(
            Path(config["directory"]),
            config["start_offset"],
            (lambda: durable_below[0]) if config["bounded"] else None,
        )
    series = ClientSeries(settings, lambda key: key not in gone, landed=landed)
    holds.append(series.holds)
    while True:
        request = _read(from_node)
        if request is None:
            return 0
        if "durable_below" in request:
            durable_below[0] = request["durable_below"]
        now_ms = request["now_ms"]
        op = request["op"]
        if op == "fold":
            series._fold_all((), now_ms)
            _write(to_node, {"counters": _counters(series)})
        elif op == "held":
            series._fold_all((), now_ms, SCRAPE_CATCH_UP_S)
            _write(to_node, {"ids": series.instance_ids()})
        elif op == "render":
            # The instances the node no longer caches go first, so a push that re-created
            # one since (read by this fold) brings it back.
            gone.update(request["gone"])
            series.forget_uncached()
            gone.clear()
            # ``held`` caught up a moment ago: one more batch at most, then the page.
            body = series._fold_and_render((), request["open_metrics"], now_ms, 0.0)
            _write(to_node, {"counters": _counters(series)}, body)
        else:
            raise ValueError(f"unknown request {op!r}")


# The child's nice value: on a busy node the push path comes first; the fold takes the CPU
# the push path leaves, falls behind during a saturation and catches up from the log after
# it (what it reads stays on disk), so the endpoint is late then, never wrong.
FOLD_NICE: Final = 19
# A scrape folds what landed before it answers for this long at most (its ``held``
# request; ``render`` folds one batch more at most), then answers with what is folded and
# the next fold goes on: a scrape during a saturation is not held up by a fold that fell
# behind, nor by a priority that gives the fold little CPU.
SCRAPE_CATCH_UP_S: Final = 0.5


def _topic_source(
    config: dict[str, Any],
    to_node: IO[bytes],
    from_node: IO[bytes],
    holds: Callable[[str], bool],
) -> Landed:
    """The landing topic, from the offsets the node gave (or its end offsets), said to the
    node; only the records of the instances the node caches."""
    from collector.telemetry.prometheus.landed_topic import LandedTopic

    raw = config["topic"]
    given = config["start_offsets"]
    topic = LandedTopic(
        TopicSettings(**raw),
        start_offsets=None if given is None else {int(p): o for p, o in given.items()},
    )
    starts = {str(p): o for p, o in topic.start_offsets.items()}
    _write(to_node, {"start_offsets": starts})

    def cached(ids: list[str]) -> set[str]:
        _write(to_node, {"ask": ids})
        answer = _read(from_node)
        if answer is None:
            raise EOFError("the node closed the pipe")
        return set(answer["cached"])

    return _CachedOnly(topic, holds, cached)


class _CachedOnly:
    """The records of ``inner`` whose instance the fold holds or the node caches: the
    landing topic holds every replica's pushes, a node's page only its own clients'."""

    def __init__(
        self,
        inner: Landed,
        holds: Callable[[str], bool],
        cached: Callable[[list[str]], set[str]],
    ) -> None:
        self._inner = inner
        self._holds = holds
        self._cached = cached
        self.records_read = 0

    def take(self, max_bytes: int) -> list[tuple[TelemetryContext, bytes]]:
        holds = self._holds
        while True:
            batch = self._inner.take(max_bytes)
            if not batch:
                return []
            unknown = sorted(
                {
                    context.client_instance_id
                    for context, _ in batch
                    if not holds(context.client_instance_id)
                }
            )
            cached = self._cached(unknown) if unknown else set()
            kept = [
                (context, payload)
                for context, payload in batch
                if context.client_instance_id in cached
                or holds(context.client_instance_id)
            ]
            if kept:
                self.records_read += len(kept)
                return kept


def main() -> int:
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    os.nice(FOLD_NICE)
    # The page and the requests go over stdin and stdout: nothing else may print there.
    to_node = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr
    return serve(to_node, sys.stdin.buffer)


if __name__ == "__main__":
    sys.exit(main())

"""One landing-log write per event-loop turn, shared by every connection.

The landing log is write-behind: a push is only *staged* while its request is handled;
before the answers of that push leave, the staged records must be handed to the kernel
(``LandingLog.flush``, one ``writev``).  Flushing once per socket read costs a system call
and a round of per-flush Python for every read, and at high load a read carries only one
to three pushes.  Instead, the first connection that has answers waiting on staged records
in a loop turn schedules one flush with ``call_soon``; every other connection that reads in
the same turn joins it.  When the loop has run that turn's reads, the flush writes all of
their records with one ``writev`` and releases every waiting connection's answers at once
(Kafka's group commit idea, applied to the page cache).

:class:`FlushBarrier` is the part of ``asyncio.Future`` that ``KafkaProtocol`` waits on
(``done``, ``exception``, ``add_done_callback``), resolved synchronously: the answers go
out in the same loop turn as the flush, without one more scheduled callback per
connection.  A failed flush (or group-commit fsync) resolves it with the error, and each
waiting connection answers the pushes of that batch with THROTTLING_QUOTA_EXCEEDED instead
of "accepted" (:meth:`DurabilityGate.refuse_pushes`): nothing unwritten is acknowledged,
and the client pushes again one interval later.  :class:`DurabilityGate` is what a
connection asks for its barrier; every barrier is a FlushBarrier (a group-commit fsync's
future is wrapped in one), so the connection's calls on it are compiled calls.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from proto.errors import Errors

if TYPE_CHECKING:
    from collector.core.session import Session
    from exporters.context import TelemetryContext
    from exporters.landing.log import LandingLog

__all__ = [
    "DurabilityGate",
    "FlushBarrier",
    "NotLanded",
    "PendingResponse",
    "TurnFlusher",
]

log = logging.getLogger(__name__)

# A PushTelemetry v0 answer, the whole frame: size 12, correlation id, response header v1's
# empty tagged fields, ThrottleTimeMs, ErrorCode, the body's empty tagged fields.
_PUSH_ANSWER = struct.Struct(">iiBihB")
_PUSH_ANSWER_BYTES: Final = _PUSH_ANSWER.size
_PUSH_ANSWER_SIZE_FIELD: Final = _PUSH_ANSWER.size - 4
# Why 89: the one push error both clients retry after one interval without a log line that
# blames the client's payload.  librdkafka (src/rdkafka_telemetry.c,
# rd_kafka_handle_push_telemetry) stops telemetry on INVALID_REQUEST and INVALID_RECORD,
# keeps pushing on TELEMETRY_TOO_LARGE (warning that the payload is too large) and on any
# other code asks for the subscription again after push_interval_ms, then pushes.  The Java
# client (ClientTelemetryUtils.maybeFetchErrorIntervalMs, from
# ClientTelemetryReporter...handleResponse(PushTelemetryResponse)) disables telemetry on
# INVALID_REQUEST, INVALID_RECORD, UNSUPPORTED_VERSION *and every unmapped code*, Kafka's
# own KAFKA_STORAGE_ERROR (56) included; it re-Gets after one interval on
# THROTTLING_QUOTA_EXCEEDED and TELEMETRY_TOO_LARGE.
_REFUSED: Final = int(Errors.THROTTLING_QUOTA_EXCEEDED)
_CORRELATION_ID = struct.Struct(">i")
_ACCEPTED: Final = int(Errors.NONE)


def _correlation_id(answer: bytes) -> int:
    return int(_CORRELATION_ID.unpack_from(answer, 4)[0])


def refused_push(answer: bytes) -> bytes | None:
    """``answer`` turned from "accepted" into THROTTLING_QUOTA_EXCEEDED when it has the
    layout of a PushTelemetry v0 answer with error 0 (throttle time kept); None otherwise.

    The layout alone is not proof (an AlterClientQuotas v0 answer with no entries has the
    same 16 bytes): the caller first matches the answer's correlation id to a push whose
    record did not land (``DurabilityGate.refuse_pushes``)."""
    if len(answer) != _PUSH_ANSWER_BYTES:
        return None
    size, correlation_id, header_tags, throttle_ms, error_code, body_tags = (
        _PUSH_ANSWER.unpack(answer)
    )
    if (
        size != _PUSH_ANSWER_SIZE_FIELD
        or header_tags != 0
        or body_tags != 0
        or error_code != _ACCEPTED
    ):
        return None
    return _PUSH_ANSWER.pack(size, correlation_id, 0, throttle_ms, _REFUSED, 0)


class FlushBarrier:
    __slots__ = ("_callbacks", "_done", "_exception")

    def __init__(self) -> None:
        self._callbacks: list[Callable[[FlushBarrier], None]] = []
        self._done = False
        self._exception: BaseException | None = None

    def done(self) -> bool:
        return self._done

    def exception(self) -> BaseException | None:
        return self._exception

    def add_done_callback(self, callback: Callable[[FlushBarrier], None]) -> None:
        if self._done:
            callback(self)
        else:
            self._callbacks.append(callback)

    def resolve_when_done(self, future: asyncio.Future[Any]) -> None:
        """Resolves this barrier when ``future`` completes (with its error, if any)."""

        def done(completed: asyncio.Future[Any]) -> None:
            if completed.cancelled():
                self.resolve(asyncio.CancelledError("landing sync cancelled"))
            else:
                self.resolve(completed.exception())

        future.add_done_callback(done)

    def resolve(self, exception: BaseException | None = None) -> None:
        self._done = True
        self._exception = exception
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback(self)
            except (
                Exception
            ):  # one connection's failure must not hold the others' answers
                log.exception("releasing answers after a landing flush failed")


class PendingResponse(FlushBarrier):
    """An answer that comes later (a gateway waits for the upstream broker): a slot in the
    connection's ordered answer queue, resolved with the response's bytes, size prefix
    included, in pieces written as they are (a large Fetch response is not copied to join
    them).  A failed one closes the connection after the answers queued before it."""

    __slots__ = ("responses",)

    def __init__(self) -> None:
        super().__init__()
        self.responses: list[bytes] = []

    def complete(self, pieces: list[bytes]) -> None:
        self.responses.extend(pieces)
        self.resolve()

    def fail(self, error: BaseException) -> None:
        if not self.done():
            self.resolve(error)


class NotLanded(Exception):
    """What a barrier fails with when the landing log could not write or fsync: the
    records (context, payload) of the pushes that must not be acknowledged."""

    def __init__(
        self, cause: BaseException, records: list[tuple[TelemetryContext, bytes]]
    ) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.records = records


class TurnFlusher:
    """Schedules at most one flush per loop turn and hands out its barrier.

    ``flush`` writes what is staged (raises when it is not all in the log); ``sync``, when
    given, returns an awaitable that completes once the written records are fsynced (the
    ``fsync: always`` + ``group_commit`` policy), or ``None`` when nothing needs syncing.
    """

    __slots__ = ("_barrier", "_flush", "_sync")

    def __init__(
        self,
        flush: Callable[[], list[tuple[TelemetryContext, bytes]]],
        sync: Callable[[], asyncio.Future[Any] | None] | None = None,
    ) -> None:
        self._flush = flush
        self._sync = sync
        self._barrier: FlushBarrier | None = None

    def barrier(self) -> FlushBarrier:
        barrier = self._barrier
        if barrier is None:
            barrier = self._barrier = FlushBarrier()
            asyncio.get_running_loop().call_soon(self._run)
        return barrier

    def flush_now(self) -> FlushBarrier:
        """This turn's flush, run now (records reached the log's batch bound): returns its
        barrier, resolved unless a group-commit fsync is still running.  The call scheduled
        for the end of the turn then finds nothing to do, or the records staged since."""
        barrier, self._barrier = self._barrier, None
        if barrier is None:
            barrier = FlushBarrier()
        self._flush_into(barrier)
        return barrier

    def _run(self) -> None:
        barrier, self._barrier = self._barrier, None
        if barrier is not None:
            self._flush_into(barrier)

    def _flush_into(self, barrier: FlushBarrier) -> None:
        try:
            written = self._flush()
        except Exception as exc:  # LandingError or OSError: both mean "not in the log"
            # UnlandedRecords names the records whose pushes are refused; any other error
            # leaves the waiting connections to close without their answers.
            records = getattr(exc, "records", None)
            barrier.resolve(exc if records is None else NotLanded(exc, records))
            return
        synced = self._sync() if self._sync is not None else None
        if synced is None:
            barrier.resolve()
        else:
            _resolve_after_sync(barrier, synced, written)


def _resolve_after_sync(
    barrier: FlushBarrier,
    synced: asyncio.Future[Any],
    written: list[tuple[TelemetryContext, bytes]],
) -> None:
    """Resolves ``barrier`` when the group-commit fsync ``synced`` is done; if it fails,
    the records this flush wrote are not durable, so their pushes are refused."""

    def done(completed: asyncio.Future[Any]) -> None:
        if completed.cancelled():
            barrier.resolve(asyncio.CancelledError("landing sync cancelled"))
            return
        error = completed.exception()
        barrier.resolve(None if error is None else NotLanded(error, written))

    synced.add_done_callback(done)


class DurabilityGate:
    """What a connection's answers wait for before they are written (asked once per socket
    read that produced answers, so it is a compiled call, not a method of the server).

    | state                                                         | answers wait for      |
    |---------------------------------------------------------------|-----------------------|
    | the log's ``write_behind_max_records`` or more pushes staged  | a flush, run now      |
    | fewer pushes staged                                           | this turn's flush     |
    | nothing staged, a group-commit fsync owed for what is written | that fsync            |
    | otherwise                                                     | nothing (``None``)    |

    Why the bound: one loop turn handles every connection that has data, and at a
    moderate rate that is dozens of reads (measured: about 50 reads, 200 pushes per
    turn at 19,000 pushes/s); answers held until the turn's end wait for all of them.
    Flushing every 32 records costs one ``writev`` per 32 pushes and lets answers leave
    within a few reads.

    ``pending_sync`` (only with ``fsync: always`` + ``group_commit``) returns the future of
    one fsync covering everything written so far, or None when nothing is owed.
    """

    __slots__ = ("_landing", "_pending_sync", "_turn_flusher", "pushes_refused")

    def __init__(
        self,
        landing: LandingLog | None,
        pending_sync: Callable[[], asyncio.Future[Any] | None] | None = None,
    ) -> None:
        self._landing = landing
        self._pending_sync = pending_sync
        self._turn_flusher = (
            TurnFlusher(landing.flush, pending_sync) if landing is not None else None
        )
        # Push answers turned from "accepted" into 89 because their records did not land.
        self.pushes_refused = 0

    def refuse_pushes(
        self, answers: list[bytes], session: Session, error: BaseException
    ) -> list[bytes] | None:
        """The answers of a batch whose barrier failed with ``error``, for the connection
        ``session``: each answer to a push of this connection whose record did not land
        (matched by correlation id) turns from "accepted" into THROTTLING_QUOTA_EXCEEDED
        (see ``refused_push``); every other answer stays (it does not depend on the log).
        None when ``error`` is not the landing log's (the caller closes the connection)."""
        if not isinstance(error, NotLanded):
            return None
        listener = session.listener_name
        address = session.client_source_address
        port = session.client_source_port
        unlanded = {
            context.correlation_id
            for context, _ in error.records
            if context.client_source_port == port
            and context.client_source_address == address
            and context.listener_name == listener
        }
        refused = 0
        result: list[bytes] = []
        for answer in answers:
            replaced = refused_push(answer) if unlanded else None
            if replaced is not None and _correlation_id(answer) in unlanded:
                result.append(replaced)
                refused += 1
            else:
                result.append(answer)
        self.pushes_refused += refused
        return result

    def barrier(self) -> FlushBarrier | None:
        landing = self._landing
        if landing is not None and landing.needs_flush:
            if landing.needs_flush_now:
                return self._turn_flusher.flush_now()  # type: ignore[union-attr]
            return self._turn_flusher.barrier()  # type: ignore[union-attr]
        if self._pending_sync is None:
            return None
        synced = self._pending_sync()
        if synced is None:
            return None
        barrier = FlushBarrier()
        barrier.resolve_when_done(synced)
        return barrier

"""The applications behind ``GET /v1/applications``: the manager's live client instances
joined into the things operators run, a Kafka Streams application, a consumer group, a
share group.

Pure functions over the instances and what their pushes said
(``ClientMetricsInstance.application``, read by collector/telemetry/application_signals.py):
no clock but the offset that turns the manager's monotonic times into UTC, no I/O.

The join, rule by rule (first match wins within each step):

=====================  ==============================================================
step                   rule
=====================  ==============================================================
Streams client         an instance whose pushes held an ``org.apache.kafka.stream.*``
                       metric; or whose client id is Streams' scheme
                       (``<prefix>-admin``, ``-global-consumer``,
                       ``-StreamThread-<n>-consumer|producer|restore-consumer``,
                       ``-StateUpdater-<n>-restore-consumer``) with a prefix that
                       ends in a process uuid (the default ``client.id``) or is shared
                       with a Streams client of the first kind
its process            the ``process_id`` attribute of its ``client.state`` or
                       ``thread.state`` points; else the ``process_id`` another
                       instance with the same client-id prefix carried; else the uuid
                       of its prefix; else the prefix itself (a ``client.id`` that was
                       set, before any state point arrived)
process's application  the ``application_id`` attribute of a ``client.state`` point
                       (KIP-1221, 4.2+); else the prefix minus its uuid; else the
                       ``group_id`` resource attribute of its thread consumers (Streams
                       uses ``application.id`` as the group id); else the process key
application            the processes with one ``application_id``: kind ``streams``
share group            not a Streams client, pushed ``org.apache.kafka.consumer.share.*``
                       metrics: kind ``share_group``, id its ``group_id`` resource
                       attribute (its client id when it sent none)
consumer group         not a Streams client, a ``group_id`` resource attribute: kind
                       ``consumer_group``, id the group id
anything else          no application (a plain producer, admin or unassigned consumer)
=====================  ==============================================================

States, by name (proto/streams_states.py; the pushes carry the enum ordinals):

==================  ==========================================================
field               from
==================  ==========================================================
process ``state``   the latest ``client.state`` point of its admin client
                    (``KafkaStreams.State``); ``state_since`` the first point of
                    the latest run of that value
thread ``state``    the latest ``thread.state`` point of the thread's main
                    consumer (``StreamThread.State``), by ``thread_id``
alive / failed      ``alive.stream.threads`` (latest), ``failed.stream.threads``
                    (latest; the sum of the deltas when pushed as delta sums)
streams ``state``   the worst process state, in the order ERROR, PENDING_ERROR,
                    NOT_RUNNING, PENDING_SHUTDOWN, CREATED, REBALANCING, RUNNING
                    (worst first); processes with no state yet do not count; None
                    while none has one
group ``state``     None: a consumer pushes no group state (the group coordinator
                    has it, ``kafka-consumer-groups.sh --describe``)
==================  ==========================================================

An ordinal no state has (a newer Kafka's enum) shows as ``state`` None with its
``state_value``.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from collector.telemetry.application_signals import (
    ALIVE_THREADS_METRIC,
    FAILED_THREADS_METRIC,
    NOT_AN_APPLICATION,
    StreamsClientId,
    StreamsPoint,
    parse_streams_client_id,
)
from collector.telemetry.client_metrics import NEVER_MS, ClientMetricsInstance
from proto.streams_states import (
    CLIENT_STATE_METRIC,
    KAFKA_STREAMS_STATES,
    STREAM_THREAD_STATES,
    THREAD_STATE_METRIC,
    state_name,
)

__all__ = ["KINDS", "STREAMS_STATE_SEVERITY", "applications", "applications_json"]

KINDS: Final = ("streams", "consumer_group", "share_group")

# KafkaStreams.State, worst first: an application is as healthy as its worst process.
STREAMS_STATE_SEVERITY: Final = (
    "ERROR",
    "PENDING_ERROR",
    "NOT_RUNNING",
    "PENDING_SHUTDOWN",
    "CREATED",
    "REBALANCING",
    "RUNNING",
)

_GROUP_ROLES: Final = {"consumer_group": "consumer", "share_group": "share-consumer"}
_ROLE_BY_METRIC: Final = {CLIENT_STATE_METRIC: "admin", THREAD_STATE_METRIC: "consumer"}


@dataclass
class _Member:
    instance: ClientMetricsInstance
    parsed: StreamsClientId | None
    points: tuple[StreamsPoint, ...]
    process_id: str | None  # from its points
    application_id: str | None  # from its points


@dataclass
class _Process:
    key: str
    members: list[_Member] = field(default_factory=list)
    prefixes: set[str] = field(default_factory=set)


def applications(
    instances: Iterable[ClientMetricsInstance], wall_offset_ms: int
) -> list[dict[str, Any]]:
    """Every application the instances make up (module docstring), sorted by kind and
    id; instances in no application are left out."""
    streams: list[_Member] = []
    maybe_streams: list[_Member] = []  # a Streams client id, no Streams push yet
    groups: dict[tuple[str, str], list[ClientMetricsInstance]] = {}
    for instance in instances:
        signals = instance.application
        parsed = parse_streams_client_id(instance.metadata.client_id)
        if signals is not None and signals.streams:
            streams.append(_member(instance, parsed))
        elif parsed is not None:
            maybe_streams.append(_member(instance, parsed))
        elif signals is not None and signals is not NOT_AN_APPLICATION:
            _group(groups, instance)
    streams_prefixes = {m.parsed.process_key for m in streams if m.parsed is not None}
    for member in maybe_streams:
        assert member.parsed is not None
        if (
            member.parsed.process_id is not None
            or member.parsed.process_key in streams_prefixes
        ):
            streams.append(member)
        elif member.instance.application not in (None, NOT_AN_APPLICATION):
            _group(groups, member.instance)

    found = [
        _streams_entry(application_id, processes, wall_offset_ms)
        for application_id, processes in _streams_applications(streams).items()
    ]
    for (kind, group_id), members in groups.items():
        found.append(
            {
                "application_id": group_id,
                "kind": kind,
                "state": None,
                "processes": [],
                "threads": [],
                "instances": [
                    _instance_entry(i, _GROUP_ROLES[kind], None, wall_offset_ms)
                    for i in sorted(members, key=_instance_order)
                ],
            }
        )
    found.sort(key=lambda a: (KINDS.index(a["kind"]), a["application_id"] or ""))
    return found


def applications_json(
    instances: Iterable[ClientMetricsInstance], wall_offset_ms: int
) -> dict[str, Any]:
    """The body of ``GET /v1/applications``."""
    return {"applications": applications(instances, wall_offset_ms)}


def _member(instance: ClientMetricsInstance, parsed: StreamsClientId | None) -> _Member:
    signals = instance.application
    points = signals.points if signals is not None else ()
    process_id = next((p.process_id for p in points if p.process_id), None)
    application_id = next((p.application_id for p in points if p.application_id), None)
    return _Member(instance, parsed, points, process_id, application_id)


def _group(
    groups: dict[tuple[str, str], list[ClientMetricsInstance]],
    instance: ClientMetricsInstance,
) -> None:
    signals = instance.application
    assert signals is not None
    kind = "share_group" if signals.share_consumer else "consumer_group"
    group_id = signals.group_id or instance.metadata.client_id or ""
    groups.setdefault((kind, group_id), []).append(instance)


def _streams_applications(members: list[_Member]) -> dict[str, list[_Process]]:
    """application id -> its processes."""
    # A client-id prefix's process id, from any of its instances that carried one.
    prefix_process: dict[str, str] = {}
    for member in members:
        if member.parsed is not None and member.process_id is not None:
            prefix_process.setdefault(member.parsed.process_key, member.process_id)
    processes: dict[str, _Process] = {}
    for member in members:
        parsed = member.parsed
        key = member.process_id
        if key is None and parsed is not None:
            key = (
                prefix_process.get(parsed.process_key)
                or parsed.process_id
                or parsed.process_key
            )
        if key is None:
            key = member.instance.metadata.client_id or member.instance.instance_id_str
        process = processes.setdefault(key, _Process(key))
        process.members.append(member)
        if parsed is not None:
            process.prefixes.add(parsed.process_key)
    by_application: dict[str, list[_Process]] = {}
    for process in processes.values():
        by_application.setdefault(_application_id(process), []).append(process)
    return by_application


def _application_id(process: _Process) -> str:
    for member in process.members:
        if member.application_id:
            return member.application_id
    for member in process.members:
        if member.parsed is not None and member.parsed.application_id:
            return member.parsed.application_id
    for member in process.members:
        signals = member.instance.application
        if signals is not None and signals.group_id:
            return signals.group_id
    return process.key


def _streams_entry(
    application_id: str, processes: list[_Process], wall_offset_ms: int
) -> dict[str, Any]:
    process_entries: list[dict[str, Any]] = []
    thread_entries: list[dict[str, Any]] = []
    instance_entries: list[dict[str, Any]] = []
    for process in sorted(processes, key=lambda p: p.key):
        process_id = next(
            (m.process_id for m in process.members if m.process_id), None
        ) or next(
            (
                m.parsed.process_id
                for m in process.members
                if m.parsed is not None and m.parsed.process_id
            ),
            None,
        )
        latest: dict[str, StreamsPoint] = {}
        threads: dict[str, StreamsPoint] = {}
        for member in process.members:
            for point in member.points:
                if point.metric == THREAD_STATE_METRIC and point.thread_id:
                    _keep_latest(threads, point.thread_id, point)
                elif point.metric != THREAD_STATE_METRIC:
                    _keep_latest(latest, point.metric, point)
            instance_entries.append(
                _instance_entry(
                    member.instance, _role(member), process_id, wall_offset_ms
                )
            )
        state = latest.get(CLIENT_STATE_METRIC)
        alive = latest.get(ALIVE_THREADS_METRIC)
        failed = latest.get(FAILED_THREADS_METRIC)
        process_entries.append(
            {
                "process_id": process_id,
                "client_id_prefix": min(process.prefixes) if process.prefixes else None,
                **_state_fields(state, KAFKA_STREAMS_STATES),
                "alive_stream_threads": _count(alive),
                "failed_stream_threads": _count(failed),
            }
        )
        for thread_id, point in sorted(threads.items()):
            thread_entries.append(
                {
                    "process_id": process_id,
                    "thread_id": thread_id,
                    **_state_fields(point, STREAM_THREAD_STATES),
                }
            )
    instance_entries.sort(key=lambda e: (e["client_id"] or "", e["client_instance_id"]))
    return {
        "application_id": application_id,
        "kind": "streams",
        "state": _worst([p["state"] for p in process_entries]),
        "processes": process_entries,
        "threads": thread_entries,
        "instances": instance_entries,
    }


def _keep_latest(into: dict[str, StreamsPoint], key: str, point: StreamsPoint) -> None:
    kept = into.get(key)
    if kept is None or point.time_unix_nano > kept.time_unix_nano:
        into[key] = point


def _state_fields(
    point: StreamsPoint | None, states: tuple[str, ...]
) -> dict[str, Any]:
    if point is None:
        return {"state": None, "state_value": None, "state_since": None}
    value = point.value
    return {
        "state": state_name(states, value),
        "state_value": int(value) if float(value).is_integer() else value,
        "state_since": _utc_nanos(point.since_unix_nano),
    }


def _count(point: StreamsPoint | None) -> int | None:
    return None if point is None else int(point.value)


def _worst(states: list[str | None]) -> str | None:
    known = [s for s in states if s in STREAMS_STATE_SEVERITY]
    if not known:
        return None
    return min(known, key=STREAMS_STATE_SEVERITY.index)


def _role(member: _Member) -> str:
    if member.parsed is not None:
        return member.parsed.role
    for point in member.points:
        role = _ROLE_BY_METRIC.get(point.metric)
        if role is not None:
            return role
    return "unknown"


def _instance_order(instance: ClientMetricsInstance) -> tuple[str, str]:
    return instance.metadata.client_id or "", instance.instance_id_str


def _instance_entry(
    instance: ClientMetricsInstance,
    role: str,
    process_id: str | None,
    wall_offset_ms: int,
) -> dict[str, Any]:
    metadata = instance.metadata
    return {
        "client_instance_id": instance.instance_id_str,
        "client_id": metadata.client_id,
        "role": role,
        "process_id": process_id,
        "client_software_name": metadata.client_software_name,
        "client_software_version": metadata.client_software_version,
        "pushes_accepted": instance.pushes_accepted,
        "last_push": _utc_ms(instance.last_push_accepted_ms, wall_offset_ms),
        "terminating": instance.terminating,
    }


def _utc_ms(monotonic_ms: int, wall_offset_ms: int) -> str | None:
    if monotonic_ms == NEVER_MS:
        return None
    return _utc_text((monotonic_ms + wall_offset_ms) / 1000)


def _utc_nanos(unix_nano: int) -> str | None:
    """A point's time; None for 0, OTLP's "not set"."""
    return _utc_text(unix_nano / 1e9) if unix_nano > 0 else None


def _utc_text(seconds: float) -> str:
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")

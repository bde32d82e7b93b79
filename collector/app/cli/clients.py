"""The CLI's side of the admin endpoints: ``ktc clients`` (every page of ``GET
/v1/clients``, printed as a table, JSON or CSV), ``ktc clients --inventory`` (``GET
/v1/clients/inventory``: every client's connections, telemetry and request versions),
``ktc clients --conformance`` (``GET /v1/clients/conformance``: every client library graded
against KIP-714), ``ktc clients --applications`` (``GET /v1/applications``: Streams
applications, consumer and share groups, one row per application, process, thread and
instance) and ``ktc subscriptions alter --dry-run`` (``POST /v1/subscriptions/preview``,
printed per affected instance).

``--server`` is the collector's HTTP listener (``http.listener``), e.g.
``http://127.0.0.1:8714``; ``--admin-secret`` (or ``KTC_HTTP_ADMIN_SECRET``) its
``http.admin.secret`` when one is set.
"""

from __future__ import annotations

import csv
import io
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import click

__all__ = [
    "ADMIN_SECRET",
    "SERVER",
    "AdminRequestError",
    "application_rows",
    "clients",
    "fetch_applications",
    "fetch_clients",
    "fetch_conformance",
    "fetch_inventory",
    "format_preview",
    "post_preview",
]

SERVER = click.option(
    "--server",
    default="http://127.0.0.1:8714",
    show_default=True,
    envvar="KTC_SERVER",
    help="The collector's HTTP listener (http.listener).",
)
ADMIN_SECRET = click.option(
    "--admin-secret",
    envvar="KTC_HTTP_ADMIN_SECRET",
    help="The collector's http.admin.secret, when it has one.",
)

# What the table shows (every field is in the JSON and CSV): header -> how to render.
TABLE_COLUMNS: dict[str, Any] = {
    "INSTANCE": lambda c: c["client_instance_id"],
    "CLIENT ID": lambda c: c["client_id"] or "",
    "SOFTWARE": lambda c: f"{c['client_software_name']} {c['client_software_version']}",
    "SOURCE": lambda c: f"{c['client_source_address']}:{c['client_source_port']}",
    "PRINCIPAL": lambda c: c["principal"],
    "SUBSCRIPTIONS": lambda c: ",".join(c["subscriptions"]) or "-",
    "INTERVAL": lambda c: c["push_interval_ms"],
    "PUSHES": lambda c: c["pushes_accepted"],
    "ERRORS": lambda c: ",".join(f"{k}={v}" for k, v in c["errors"].items()) or "-",
    "THROTTLES": lambda c: c["throttles"],
    "LAST PUSH": lambda c: c["last_push"] or "-",
    "TERMINATING": lambda c: "yes" if c["terminating"] else "",
}


# What the inventory table shows (the JSON and CSV carry every field): header -> how to render.
INVENTORY_COLUMNS: dict[str, Any] = {
    "SOFTWARE": lambda c: f"{c['client_software_name']} {c['client_software_version']}",
    "CLIENT ID": lambda c: c["client_id"] or "-",
    "PRINCIPAL": lambda c: c["principal"],
    "CONNECTIONS": lambda c: c["connections"],
    "TELEMETRY": lambda c: "on" if c["telemetry"] else "off",
    "REMOVED IN KAFKA 4": lambda c: _versions(c, removed=True) or "-",
    "REQUESTS": lambda c: _versions(c, removed=False),
}


# What the conformance table shows (the JSON and CSV carry every field).
CONFORMANCE_COLUMNS: dict[str, Any] = {
    "SOFTWARE": lambda r: f"{r['client_software_name']} {r['client_software_version']}",
    "ROLE": lambda r: r["role"] or "-",
    "INSTANCES": lambda r: r["instances"],
    "PUSHES": lambda r: r["pushes"],
    "EMPTY": lambda r: r["empty_pushes"],
    "REQUIRED": lambda r: _required(r),
    "TEMPORALITY": lambda r: (
        f"{'/'.join(r['temporalities_used']) or '-'} (asked {r['temporality_asked']})"
    ),
    "TERMINATING": lambda r: r["terminating_pushes"],
    "INTERVAL KEPT": lambda r: (
        "-" if r["interval_kept"] is None else r["interval_kept"]
    ),
    "ERRORS": lambda r: ",".join(f"{k}={v}" for k, v in r["errors"].items()) or "-",
    "FLAGS": lambda r: ",".join(r["flags"]) or "-",
}


def _required(row: dict[str, Any]) -> str:
    """``2/6``: the required metrics of its role sent of those required (``-``: no role)."""
    sent = len(row["required_sent"])
    total = sent + len(row["required_lacking"])
    return f"{sent}/{total}" if total else "-"


# The applications as flat rows (the CSV has every column, the table these): one row per
# application, then its processes, threads and instances (``level``).
APPLICATION_FIELDS = (
    "kind",
    "application_id",
    "level",
    "process_id",
    "thread_id",
    "client_instance_id",
    "client_id",
    "role",
    "state",
    "state_since",
    "alive_stream_threads",
    "failed_stream_threads",
)
APPLICATION_COLUMNS: dict[str, str] = {
    "KIND": "kind",
    "APPLICATION": "application_id",
    "LEVEL": "level",
    "PROCESS": "process_id",
    "THREAD OR INSTANCE": "member",
    "ROLE": "role",
    "STATE": "state",
    "SINCE": "state_since",
    "ALIVE": "alive_stream_threads",
    "FAILED": "failed_stream_threads",
}


def application_rows(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """``GET /v1/applications``'s answer as flat rows (:data:`APPLICATION_FIELDS`)."""
    rows: list[dict[str, Any]] = []
    for app in answer["applications"]:
        base = {f: None for f in APPLICATION_FIELDS}
        base.update(kind=app["kind"], application_id=app["application_id"])
        rows.append({**base, "level": "application", "state": app["state"]})
        for process in app["processes"]:
            rows.append(
                {
                    **base,
                    "level": "process",
                    **{k: process[k] for k in APPLICATION_FIELDS if k in process},
                }
            )
        for thread in app["threads"]:
            rows.append(
                {
                    **base,
                    "level": "thread",
                    **{k: thread[k] for k in APPLICATION_FIELDS if k in thread},
                }
            )
        for instance in app["instances"]:
            rows.append(
                {
                    **base,
                    "level": "instance",
                    **{k: instance[k] for k in APPLICATION_FIELDS if k in instance},
                }
            )
    return rows


def _versions(entry: dict[str, Any], *, removed: bool) -> str:
    """``Produce v2=10,Fetch v3=4``: the request versions of one inventory entry (only the
    removed ones with ``removed``)."""
    return ",".join(
        f"{r['api']} v{r['version']}={r['count']}"
        for r in entry["requests"]
        if r["removed"] or not removed
    )


class AdminRequestError(click.ClickException):
    """The endpoint refused or could not be reached (exit 1, its message on stderr)."""


def _request(
    server: str, path: str, secret: str | None, body: dict[str, Any] | None = None
) -> dict[str, Any]:
    url = server.rstrip("/") + path
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method="GET" if body is None else "POST"
    )
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if secret:
        request.add_header("Authorization", f"Bearer {secret}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            answer: dict[str, Any] = json.load(response)
            return answer
    except urllib.error.HTTPError as exc:
        try:
            message = json.load(exc).get("error", exc.reason)
        except ValueError:
            message = exc.reason
        raise AdminRequestError(f"{url}: {exc.code}: {message}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise AdminRequestError(f"{url}: {getattr(exc, 'reason', exc)}") from None


def fetch_clients(
    server: str,
    filters: Sequence[tuple[str, str]],
    secret: str | None,
    limit: int = 1000,
) -> list[dict[str, Any]]:
    """Every live instance passing the filters: all pages, cursor after cursor."""
    found: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        query = [*filters, ("limit", str(limit))]
        if cursor is not None:
            query.append(("cursor", cursor))
        page = _request(server, "/v1/clients?" + urllib.parse.urlencode(query), secret)
        found.extend(page["clients"])
        cursor = page["next_cursor"]
        if cursor is None:
            return found


def fetch_inventory(server: str, secret: str | None) -> dict[str, Any]:
    return _request(server, "/v1/clients/inventory", secret)


def fetch_conformance(server: str, secret: str | None) -> dict[str, Any]:
    return _request(server, "/v1/clients/conformance", secret)


def fetch_applications(server: str, secret: str | None) -> dict[str, Any]:
    return _request(server, "/v1/applications", secret)


def post_preview(
    server: str, secret: str | None, options: dict[str, Any]
) -> dict[str, Any]:
    return _request(server, "/v1/subscriptions/preview", secret, options)


def _filter(value: str) -> tuple[str, str]:
    key, sep, wanted = value.partition("=")
    if not sep or not key:
        raise click.BadParameter(
            f"expected key=value, got {value!r}", param_hint="--filter"
        )
    return key, wanted


def _table(rows: Iterable[Sequence[object]], headers: Sequence[str]) -> str:
    cells = [list(headers), *([str(cell) for cell in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join(
        "  ".join(
            cell.ljust(width) for cell, width in zip(row, widths, strict=True)
        ).rstrip()
        for row in cells
    )


def _csv(found: list[dict[str, Any]]) -> str:
    return _csv_text(
        [
            {
                **entry,
                "subscriptions": ";".join(entry["subscriptions"]),
                "metrics": ";".join(entry["metrics"]),
                "errors": _pairs(entry["errors"]),
            }
            for entry in found
        ]
    )


def _csv_text(rows: list[dict[str, Any]], fieldnames: list[str] | None = None) -> str:
    """``rows`` as CSV with a header (the first row's keys unless given); "" for none.
    None is written as an empty field."""
    if not rows:
        return ""
    out = io.StringIO()
    writer = csv.DictWriter(
        out, fieldnames=fieldnames or list(rows[0]), lineterminator="\n"
    )
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().rstrip("\n")


def _pairs(counts: dict[str, Any]) -> str:
    return ";".join(f"{k}={v}" for k, v in counts.items())


def _echo_csv(text: str) -> None:
    if text:
        click.echo(text)


@click.command("clients")
@SERVER
@ADMIN_SECRET
@click.option(
    "--filter",
    "filters",
    multiple=True,
    help="key=value, exact (repeatable): client_id, client_software_name, "
    "client_software_version, principal, listener, subscription.",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["table", "json", "csv"]),
    default="table",
    show_default=True,
)
@click.option(
    "--inventory",
    is_flag=True,
    help="Every client that connected, pushing telemetry or not: its connections, "
    "telemetry and request versions, those Kafka 4 removed flagged "
    "(GET /v1/clients/inventory).",
)
@click.option(
    "--conformance",
    is_flag=True,
    help="Every client library graded against KIP-714: its pushes, empty pushes, the "
    "required metrics of its role it sent and lacks, temporalities, push interval kept, "
    "errors and known quirks (GET /v1/clients/conformance).",
)
@click.option(
    "--applications",
    is_flag=True,
    help="The live instances as applications: Kafka Streams applications (processes, "
    "threads and their states by name), consumer groups and share groups "
    "(GET /v1/applications).",
)
def clients(
    server: str,
    admin_secret: str | None,
    filters: tuple[str, ...],
    output_format: str,
    inventory: bool,
    conformance: bool,
    applications: bool,
) -> None:
    """List the client instances the collector holds now (GET /v1/clients)."""
    if conformance and applications:
        raise click.UsageError("--conformance and --applications are exclusive")
    if conformance and (filters or inventory):
        raise click.UsageError("--conformance takes neither --filter nor --inventory")
    if applications and inventory:
        raise click.UsageError("--applications and --inventory are exclusive")
    # The views of other things than client instances that --filter does not apply to.
    view = "--applications" if applications else "--inventory" if inventory else None
    if view and filters:
        raise click.UsageError(f"--filter applies to client instances, not {view}")
    answer: Any
    show: Callable[[Any, bool], None]
    if conformance:
        answer, show = fetch_conformance(server, admin_secret), _print_conformance
    elif applications:
        answer, show = fetch_applications(server, admin_secret), _print_applications
    elif inventory:
        answer, show = fetch_inventory(server, admin_secret), _print_inventory
    else:
        answer = fetch_clients(server, [_filter(f) for f in filters], admin_secret)
        show = _print_clients
    # Every view's JSON is the collector's answer as it came.
    if output_format == "json":
        click.echo(json.dumps(answer, indent=2))
    else:
        show(answer, output_format == "csv")


def _print_clients(found: list[dict[str, Any]], as_csv: bool) -> None:
    if as_csv:
        _echo_csv(_csv(found))
        return
    rows = [[render(c) for render in TABLE_COLUMNS.values()] for c in found]
    click.echo(_table(rows, list(TABLE_COLUMNS)))
    click.echo(f"{len(found)} client instance(s)", err=True)


def _print_applications(answer: dict[str, Any], as_csv: bool) -> None:
    rows = application_rows(answer)
    if as_csv:
        _echo_csv(_csv_text(rows, list(APPLICATION_FIELDS)))
        return
    table = [
        [
            _cell(row.get(key) if key != "member" else _member(row))
            for key in APPLICATION_COLUMNS.values()
        ]
        for row in rows
    ]
    click.echo(_table(table, list(APPLICATION_COLUMNS)))
    kinds = [a["kind"] for a in answer["applications"]]
    counts = ", ".join(f"{kinds.count(k)} {k}" for k in sorted(set(kinds)))
    click.echo(
        f"{len(kinds)} application(s)" + (f": {counts}" if counts else ""), err=True
    )


def _member(row: dict[str, Any]) -> str | None:
    if row["level"] == "thread":
        return str(row["thread_id"])
    if row["level"] == "instance":
        return f"{row['client_instance_id']} {row['client_id'] or ''}".rstrip()
    return None


def _cell(value: object) -> object:
    return "-" if value is None else value


def _print_inventory(answer: dict[str, Any], as_csv: bool) -> None:
    found: list[dict[str, Any]] = answer["clients"]
    if as_csv:
        _echo_csv(
            _csv_text([{**e, "requests": _versions(e, removed=False)} for e in found])
        )
        return
    rows = [[render(c) for render in INVENTORY_COLUMNS.values()] for c in found]
    click.echo(_table(rows, list(INVENTORY_COLUMNS)))
    off = sum(1 for c in found if not c["telemetry"])
    removed = sum(1 for c in found if _versions(c, removed=True))
    click.echo(
        f"{len(found)} client(s), {off} with telemetry off, {removed} sending versions "
        f"Kafka 4 removed; {answer['overflow_requests']} request(s) over the budget "
        f"({answer['series']}/{answer['max_series']} series)",
        err=True,
    )


def _print_conformance(answer: dict[str, Any], as_csv: bool) -> None:
    rows: list[dict[str, Any]] = answer["libraries"]
    if as_csv:
        lists_joined = [
            {
                **row,
                **{
                    k: ";".join(map(str, v))
                    for k, v in row.items()
                    if isinstance(v, list)
                },
                "errors": _pairs(row["errors"]),
            }
            for row in rows
        ]
        _echo_csv(_csv_text(lists_joined))
        return
    table = [[render(r) for render in CONFORMANCE_COLUMNS.values()] for r in rows]
    click.echo(_table(table, list(CONFORMANCE_COLUMNS)))
    for flag, quirk in answer["quirks"].items():
        click.echo(f"{flag}: {quirk['summary']} [{quirk['evidence']}]", err=True)
    click.echo(f"{len(rows)} client librar{'y' if len(rows) == 1 else 'ies'}", err=True)


def format_preview(answer: dict[str, Any]) -> str:
    """One block per affected instance (old -> new), then the count of unaffected."""
    lines = [
        f"Dry run: nothing stored. Altering client metrics config for {answer['name']} would change:"
    ]
    for change in answer["affected"]:
        old, new = change["old"], change["new"]
        lines.append(
            f"  {change['client_instance_id']} client_id={change['client_id']} "
            f"({change['client_software_name']} {change['client_software_version']})"
        )
        lines.append(
            f"    subscription id: {old['subscription_id']} -> {new['subscription_id']}"
        )
        lines.append(
            f"    interval.ms: {old['push_interval_ms']} -> {new['push_interval_ms']}"
        )
        lines.append(
            f"    metrics: {','.join(old['metrics']) or '(none)'} -> "
            f"{','.join(new['metrics']) or '(none)'}"
        )
        lines.append(
            f"    subscriptions: {','.join(old['subscriptions']) or '(none)'} -> "
            f"{','.join(new['subscriptions']) or '(none)'}"
        )
    lines.append(
        f"{len(answer['affected'])} instance(s) affected, {answer['unaffected']} unaffected."
    )
    return "\n".join(lines)


def print_preview(answer: dict[str, Any], output_format: str) -> None:
    if output_format == "json":
        click.echo(json.dumps(answer, indent=2))
    else:
        click.echo(format_preview(answer))
    sys.stdout.flush()

"""Upstream failures: counted per upstream node and reason, logged once per outage.

A broker that dies takes every client connection the gateway paired with it down at once,
and every client then reconnects, with backoff, for as long as the broker stays down; each
attempt fails again.  Logging each of those would bury the one fact that matters, so a node
is *down* from its first failure until a connection to it answers again (a response, not
only a TCP handshake, which a broker being killed can still complete): the first failure
writes one WARNING line, the ones after it are only counted
(``ktc_gateway_upstream_failures_total{node,reason}``) and logged at DEBUG, and the first
answered connection writes one INFO line with how long the outage lasted and how many
connections failed meanwhile.  ``ktc_gateway_upstream_down{node}`` is 1 while a node is down.

Reasons (the metric's ``reason`` label):

| reason        | what happened                                                     | an outage? |
|---------------|-------------------------------------------------------------------|------------|
| ``unreachable``| a connection could not be opened (refused, timed out, unknown node) | yes        |
| ``lost``      | the broker closed or reset a connection with requests in flight   | yes        |
| ``closed``    | the broker closed a connection with nothing in flight (idle, or after a failed authentication) | no: the client's reconnect tells |
| ``protocol``  | a malformed response, or one out of order                         | no: logged each time |

"Node" is the upstream node id the client's gateway listener stands for, or ``bootstrap``
for the bootstrap listener (any of the bootstrap servers).
"""

from __future__ import annotations

import dataclasses
import logging

from clock import SYSTEM_CLOCK, Clock

__all__ = ["UpstreamHealth", "node_label"]

log = logging.getLogger(__name__)


def node_label(node_id: int | None) -> str:
    """The metric label of a gateway listener's upstream: its node id, or ``bootstrap``."""
    return "bootstrap" if node_id is None else str(node_id)


def _what(node_id: int | None) -> str:
    return "bootstrap servers" if node_id is None else f"node {node_id}"


def _verb(node_id: int | None, singular: str, plural: str) -> str:
    return plural if node_id is None else singular


@dataclasses.dataclass(slots=True)
class _Outage:
    started_s: float
    failures: int


class UpstreamHealth:
    """Failure counts by (node, reason), and which nodes are down right now; ``clock``
    times each outage."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self.failures: dict[tuple[str, str], int] = {}
        self._outages: dict[str, _Outage] = {}

    @property
    def down(self) -> list[str]:
        """The labels of the nodes in an outage."""
        return sorted(self._outages)

    def failed(self, node_id: int | None, reason: str, detail: str) -> None:
        """A connection for a client of ``node_id``'s listener failed for ``reason``."""
        label = node_label(node_id)
        key = (label, reason)
        self.failures[key] = self.failures.get(key, 0) + 1
        if reason == "protocol":
            log.warning("upstream %s broke the protocol: %s", _what(node_id), detail)
            return
        if reason not in ("unreachable", "lost"):
            log.debug("upstream %s: %s", _what(node_id), detail)
            return
        outage = self._outages.get(label)
        if outage is not None:
            outage.failures += 1
            log.debug("upstream %s still down: %s", _what(node_id), detail)
            return
        self._outages[label] = _Outage(self._clock.monotonic(), 1)
        log.warning(
            "upstream %s %s down: %s; client connections to %s are closed until a connection "
            "answers again (each failure is counted in ktc_gateway_upstream_failures_total)",
            _what(node_id),
            _verb(node_id, "is", "are"),
            detail,
            _verb(node_id, "it", "them"),
        )

    def connected(self, node_id: int | None, host: str, port: int) -> None:
        """A connection for a client of ``node_id``'s listener answered its first request."""
        outage = self._outages.pop(node_label(node_id), None)
        if outage is None:
            return
        log.info(
            "upstream %s %s back (%s:%d) after %.1f s down, %d failed connection%s meanwhile",
            _what(node_id),
            _verb(node_id, "is", "are"),
            host,
            port,
            self._clock.monotonic() - outage.started_s,
            outage.failures,
            "" if outage.failures == 1 else "s",
        )

"""What a handler gets with a request, and the one exception that closes a connection.

Compiled (mypyc): one :class:`RequestContext` is built per request outside the push path.
"""

from __future__ import annotations

import dataclasses

# Imported at run time, not under TYPE_CHECKING: mypyc builds the dataclass from these
# annotations when the module is imported.
from collector.core.channel import Channel
from collector.core.session import Session
from proto import RequestFrame

__all__ = ["CloseConnection", "RequestContext"]


class CloseConnection(Exception):
    """The peer broke the protocol; close its connection (no response)."""


# Not frozen: one is built per request, and a frozen dataclass pays an
# object.__setattr__ call per field in __init__ (measurable on the push path).
@dataclasses.dataclass(slots=True)
class RequestContext:
    """Kafka's ``RequestContext``: the request's frame (header and raw bytes), who sent it
    (``session``), when (``now_ms``, the server's monotonic clock), and the channel it came
    on (what a throttle mutes)."""

    frame: RequestFrame
    session: Session
    now_ms: int
    channel: Channel

    @property
    def client_id(self) -> str | None:
        return self.frame.client_id

"""What a request's handlers and the quota pipeline may do to the connection a request came
on, without knowing the network layer: stop and resume reading it (a throttle) and close it.

A structural ``Protocol``: the asyncio adapter (``collector.net.protocol.KafkaProtocol``)
is one, a test's recording fake another.  It is used off the hot path only (a throttled
response, a broken peer), so a protocol call costs nothing that matters.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["Channel"]


class Channel(Protocol):
    def mute(self) -> None:
        """Stop reading (a throttled channel, KIP-219); frames already read wait too."""

    def unmute(self) -> None:
        """Resume reading after :meth:`mute`."""

    def hold_reading(self, held: bool) -> None:
        """Stop (True) or resume (False) reading because what the connection sends on is
        not draining (a gateway's upstream connection)."""

    def close_for(self, reason: str, quiet: bool = False) -> None:
        """Close after flushing what is already answered; ``reason`` is logged (at DEBUG
        when ``quiet``: the caller logged the cause once for many connections)."""

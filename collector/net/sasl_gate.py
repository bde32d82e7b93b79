"""A SASL listener's connection: its requests go through its
:class:`~collector.security.sasl.authenticator.SaslAuthenticator` before the node's handler.

The authenticator (sans-IO) decides; this adapter does what each step says on the
connection, as Kafka's ``Selector`` / ``SocketServer`` do:

| step   | here                                                                      |
|--------|---------------------------------------------------------------------------|
| pass   | the node's handler answers (the dispatcher: ApiVersions, then every API)  |
| answer | the authenticator's bytes are the answer                                  |
| fail   | reading stops; after ``connection.failed.authentication.delay.ms`` on the |
|        | node's clock the error answer is written and the connection closed        |
|        | (Kafka's delayed close, which slows password guessing)                    |
| close  | closed at once, nothing written (``CloseConnection``)                     |
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING

from collector.core.context import CloseConnection
from collector.core.handler import FunctionHandler, RequestHandler
from collector.core.session import Session
from collector.net.flush import PendingResponse
from collector.security.sasl.authenticator import SaslAuthenticator, Step, StepKind

if TYPE_CHECKING:
    from clock import Clock
    from collector.core.channel import Channel
    from proto import RequestFrame

__all__ = ["SaslGate"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, eq=False)
class SaslGate:
    """One connection's handler on a SASL listener (wrap with :meth:`handler`)."""

    inner: RequestHandler
    authenticator: SaslAuthenticator
    _: KW_ONLY
    clock: Clock
    failed_delay_ms: int
    # Told of every failed authentication (the node counts them).
    on_failure: Callable[[Session], None] | None = None
    # Told of every successful re-authentication (KIP-368; the node counts them).
    on_reauthenticated: Callable[[Session], None] | None = None

    def handler(self) -> RequestHandler:
        return FunctionHandler(self.handle)

    def handle(self, frame: RequestFrame, session: Session, channel: Channel) -> object:
        authenticator = self.authenticator
        reauthenticated = authenticator.reauthentications
        step = authenticator.receive(frame, session, self.clock.now_ms())
        kind = step.kind
        if kind is StepKind.PASS:
            return self.inner.handle(frame, session, channel)
        if kind is StepKind.ANSWER:
            if (
                authenticator.reauthentications != reauthenticated
                and self.on_reauthenticated
            ):
                self.on_reauthenticated(session)
            return step.response
        if self.on_failure is not None:
            self.on_failure(session)
        if kind is StepKind.CLOSE:
            raise CloseConnection(f"failed authentication: {step.reason}")
        return self._fail(step, channel)

    def _fail(self, step: Step, channel: Channel) -> PendingResponse:
        """Answer after the failed-authentication delay, then close; nothing else is read."""
        pending = PendingResponse()
        channel.mute()

        def answer_and_close() -> None:
            pending.complete([step.response] if step.response is not None else [])
            channel.close_for(f"failed authentication: {step.reason}")

        self.clock.call_later(self.failed_delay_ms, answer_and_close)
        return pending

"""What the gateway answers itself, with the node's own dispatcher (the same API objects,
and so the same authorizer, as ``ktc serve``), never forwarding it:

| filter | APIs | why here |
|---|---|---|
| :class:`AnswerHere` | GetTelemetrySubscriptions, PushTelemetry | telemetry ends at the gateway: its ClientMetricsManager, store and landing log |
| :class:`AnswerHere` | DescribeClientQuotas, AlterClientQuotas | the client quotas are the ones the gateway's engine enforces on this traffic |
| :class:`AnswerAcls` | DescribeAcls, CreateAcls, DeleteAcls | when the gateway has an authorizer, its ACLs are the ones it checks; else forwarded (the cluster's) |
| :class:`AnswerScram` | DescribeUserScramCredentials, AlterUserScramCredentials | when the gateway has SASL listeners, their users are the gateway's; else forwarded (the cluster's) |
"""

from __future__ import annotations

from collector.core.context import CloseConnection
from collector.gateway.filters.base import CONTINUE, Exchange, Filter, LocalAnswers
from proto import api_name

__all__ = ["AnswerAcls", "AnswerHere", "AnswerScram"]


class AnswerHere(Filter):
    __slots__ = ()

    @classmethod
    def answers_here(cls, answers: LocalAnswers) -> bool:
        return True

    def on_request(self, exchange: Exchange) -> object:
        if exchange.sasl.authenticating:
            # Not authenticated yet: a broker closes such a connection (SaslCapture).
            name = api_name(exchange.frame.api_key)
            raise CloseConnection(
                f"unexpected {name} request during SASL authentication"
            )
        return self.services.dispatcher.handle(
            exchange.frame, exchange.session, exchange.channel
        )


class _AnswerWhereSetUp(AnswerHere):
    """Answered here where the gateway's setup answers it (the subclass's
    :meth:`answers_here`, asked of the gateway's services), else forwarded: the cluster's."""

    __slots__ = ()

    def on_request(self, exchange: Exchange) -> object:
        if not self.answers_here(self.services):
            return CONTINUE
        return super().on_request(exchange)


class AnswerAcls(_AnswerWhereSetUp):
    """Forwarded where the gateway has no authorizer: the cluster's ACLs."""

    __slots__ = ()

    @classmethod
    def answers_here(cls, answers: LocalAnswers) -> bool:
        return answers.answers_acls


class AnswerScram(_AnswerWhereSetUp):
    """Forwarded where the gateway has no SASL listener: the cluster's users."""

    __slots__ = ()

    @classmethod
    def answers_here(cls, answers: LocalAnswers) -> bool:
        return answers.answers_scram

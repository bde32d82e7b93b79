"""The seam between a node and its mode: what the node gives the mode
(:class:`ModeServices`) and what it asks of it (:class:`Mode`).

After Kroxylicious' ``FilterContext`` (a filter sees a narrow typed context, never the
server): a mode sees the services it builds on, typed, in one frozen value the node makes
once its API objects are built, and never the node.  Nothing here or in a mode imports
``collector.app.node`` (an import-linter contract), so the node may change how it makes
its parts without a mode noticing, and a mode's use of the node is this module's fields.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Protocol

from prometheus_client import CollectorRegistry

from clock import Clock
from collector.app.parts.cluster_subscriptions import (
    ClusterSubscriptionReads,
    KeptSubscriptions,
)
from collector.app.parts.connections import ConnectionMode
from collector.app.parts.listeners import Listeners
from collector.broker.acl_apis import AclApis
from collector.broker.admin_apis import AdminApis
from collector.broker.kafka_apis import KafkaApis
from collector.broker.scram_apis import ScramCredentialApis
from collector.core.handler import RequestHandler
from collector.gateway.cluster_admin import ClusterAdmin
from collector.net.listeners import EndPoint
from collector.pipeline.dispatch import Api, Dispatcher
from collector.pipeline.quota_enforcer import QuotaEnforcer
from collector.pipeline.request_metrics import RequestMetrics
from collector.security.authorizer import StandardAuthorizer
from collector.security.credentials_file import DurableCredentialStore
from proto.request_limits import RequestSizeLimits
from subscriptions.cluster_store import SubscriptionStore

__all__ = ["Handling", "Mode", "ModeServices", "Store"]

# The node's config store: the local one, or the one whose subscriptions a cluster keeps.
Store = SubscriptionStore


@dataclasses.dataclass(frozen=True, slots=True)
class ModeServices:
    """The node's services a mode builds on, given to :meth:`Mode.build_handling` (the
    mode keeps them for its later calls)."""

    clock: Clock
    # The node's one registry: a mode's own series go here.
    registry: CollectorRegistry
    # Planned, bound and advertised, and the node's one listener factory (``listener``,
    # ``accept``): a listener a mode binds gets the same TLS and connection quotas.
    listeners: Listeners
    # A SASL listener's connection: ``handler`` behind the node's SASL gate.
    gate: Callable[[EndPoint, RequestHandler], RequestHandler]
    # The API objects the node answers itself, over its store and its one authorizer.
    apis: KafkaApis
    admin_apis: AdminApis
    authorizer: StandardAuthorizer | None
    credentials: DurableCredentialStore
    quotas: QuotaEnforcer
    request_metrics: RequestMetrics
    # With the subscriptions kept in a Kafka cluster (``Mode.kept_subscriptions``), what
    # reads them; None with the local store.
    cluster_subscriptions: ClusterSubscriptionReads | None

    def local_apis(self, *, acls: bool = True, scram: bool = True) -> dict[int, Api]:
        """api key -> its row, for every API the node answers itself: telemetry, the
        admin APIs (client-metrics configs, client quotas), the ACLs and the SCRAM
        credentials (either left out when told), all over the node's one authorizer."""
        table = self.apis.table()
        table.update(self.admin_apis.table())
        if acls:
            table.update(AclApis(self.authorizer).table())
        if scram:
            table.update(ScramCredentialApis(self.credentials, self.authorizer).table())
        return table

    def dispatcher_over(self, table: dict[int, Api]) -> Dispatcher:
        """A dispatcher over ``table``, with the node's quotas and request metrics."""
        return Dispatcher(
            table, clock=self.clock, quota=self.quotas, observer=self.request_metrics
        )

    def subscriptions_in_cluster(self) -> bool:
        """Whether a Kafka cluster serves the subscriptions in force now."""
        reads = self.cluster_subscriptions
        return reads is not None and reads.in_cluster

    def subscriptions_altered(self) -> None:
        """A CLIENT_METRICS alter went to the cluster: read its subscriptions again soon."""
        if self.cluster_subscriptions is not None:
            self.cluster_subscriptions.read_soon()


@dataclasses.dataclass(frozen=True, slots=True)
class Handling:
    """What answers a node's requests, as its mode built it: the dispatcher over the APIs
    the node answers itself, the handler of a connection that has none of its own, and
    each API's request size limit."""

    dispatcher: Dispatcher
    handler: RequestHandler
    request_size_limits: RequestSizeLimits


class Mode(ConnectionMode, Protocol):
    """What makes a node serve or a gateway (and the connection hooks it inherits), in
    the order the node asks."""

    # Written in the logs at start ("gateway node 1 ... started").
    name: str

    def kept_subscriptions(self) -> KeptSubscriptions | None:
        """Where a Kafka cluster keeps the subscriptions, by this mode's settings (None:
        the local store's).  The node then serves the cluster's over its local store."""

    def build_handling(self, services: ModeServices) -> Handling:
        """What answers requests, over the node's services (kept for the calls below)."""

    async def bind_listeners(self) -> None:
        """What the mode starts once the node's listeners are bound, before it is ready."""

    def subscriptions_admin(self) -> ClusterAdmin | None:
        """The admin client that reads the kept subscriptions (asked after
        :meth:`bind_listeners`, only when :meth:`kept_subscriptions` named a cluster);
        None: the cluster cannot be read, the local store's are served."""

    def ready_file(self) -> dict[str, object]:
        """What the mode adds to ``--ready-file`` (the gateway: its per-node ports)."""

    def state_clusters(self) -> dict[str, str]:
        """Each kind of state (``data_dir.STATE_KINDS``) the node keeps in a Kafka cluster,
        besides the kept subscriptions (the node names those) -> that cluster's bootstrap
        servers (asked once the handling is built); a kind not named is the data
        directory's."""

"""Gateway mode: what ``ktc gateway`` does between Kafka clients and an upstream cluster.
The application (``collector.app.gateway_server``) only wires these parts into the node.

| part | modules |
|---|---|
| the per-API work, as filters | ``filters/`` (``base.py``: what a filter is; ``__init__.py``: ``FILTERS``, the table from API key to its filters, and the APIs answered here derived from it; one module per concern) |
| the chain runner: one client connection and its upstream connection | ``forwarding`` |
| what every pair shares | ``service`` (``Gateway``), ``outages`` (failures logged once per outage), ``metrics`` (the ``ktc_gateway_*`` series) |
| the upstream cluster | ``upstream_cluster`` (TLS, the gateway's own login, discovery, whether clients must authenticate), ``upstream_login``, ``discovery``, ``authentication``, ``cluster_admin`` and ``cluster_subscriptions`` (subscriptions kept in the cluster) |
| what the gateway learned of the cluster | ``cluster`` (``ClusterView``: cluster id, partition counts), ``topology`` (a gateway port per upstream node) |
| policies the filters apply | ``forwarded_quotas`` (what each quota on forwarded traffic meters), ``admin_split`` (client-metrics administration split from the rest) |

And the wire layer the filters use, pure functions over bytes (no I/O; they import only
``proto``, the standard library and each other):

* ``addresses``: broker addresses in responses, found, reported and rewritten by node id;
* ``throttle``: a response's ThrottleTimeMs, read and patched in place;
* ``api_versions``: an upstream ApiVersionsResponse capped to what the gateway handles;
* ``requests``: request headers, Produce acks, partition-mutation counts, strict
  THROTTLING_QUOTA_EXCEEDED answers;
* ``sasl``: the principal of a PLAIN or SCRAM exchange (never the password);
* ``frames``: upstream responses cut into frames, each body found after its header;
* ``wire``: the walking steps they share, and ``MalformedResponseError``.
"""

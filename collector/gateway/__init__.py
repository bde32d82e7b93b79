"""Gateway mode's wire layer: what the gateway decodes or rewrites in the traffic it forwards
between Kafka clients and an upstream cluster, as pure functions over bytes (no I/O).

* ``addresses``: broker addresses in responses, found, reported and rewritten by node id;
* ``throttle``: a response's ThrottleTimeMs, read and patched in place;
* ``api_versions``: an upstream ApiVersionsResponse capped to what the gateway handles;
* ``requests``: request headers, Produce acks, partition-mutation counts, strict
  THROTTLING_QUOTA_EXCEEDED answers;
* ``sasl``: the principal of a PLAIN or SCRAM exchange (never the password);
* ``frames``: upstream responses cut into frames, each body found after its header;
* ``wire``: the walking steps they share, and ``MalformedResponseError``.

These modules import only ``proto`` and the standard library.
"""

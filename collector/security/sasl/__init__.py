"""SASL on the collector's listeners, sans-IO (no sockets, no clock: ``now_ms`` is passed).

| module             | what                                                              |
|--------------------|-------------------------------------------------------------------|
| ``mechanism``      | the ``SaslServer`` interface and the two failure kinds            |
| ``servers``        | the mechanisms served (name -> server factory)                    |
| ``plain``          | PLAIN (RFC 4616), as Kafka's ``PlainSaslServer``                   |
| ``scram``          | SCRAM-SHA-256/512 (RFC 5802, 7677), as Kafka's ``ScramSaslServer`` |
| ``authenticator``  | one connection's SaslHandshake/SaslAuthenticate state machine, as  |
|                    | Kafka's ``SaslServerAuthenticator`` (re-authentication, KIP-368)   |
"""

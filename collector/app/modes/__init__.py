"""The node's two modes and their seam (docs/architecture.md, "One node, two modes").

| module | what |
|---|---|
| ``services`` | the seam: ``ModeServices`` (what the node gives a mode), ``Mode`` (what it asks of one), ``Handling`` |
| ``serve`` | ``ServeMode``: ``ktc serve``, every request answered by the node's own dispatcher |
| ``gateway`` | ``GatewayMode``: ``ktc gateway``, a pair per connection in front of a Kafka cluster |

A mode imports nothing of the node (``collector.app.node``), of ``server.py`` and
``gateway_server.py`` (a node in each mode) or of the CLI: an import-linter contract.
"""

"""Who a connection is and what it may do: credentials (SCRAM, PLAIN), SASL, principals and
authorization. Imports only ``collector.core`` inside the collector (docs/architecture.md)."""

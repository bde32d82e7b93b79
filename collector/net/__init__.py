"""Sockets: listeners, the accept loop, TLS, the asyncio protocol adapter, answer flushing.
Imports nothing of the collector above ``collector.core``."""

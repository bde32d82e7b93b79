"""What every other part of the collector builds on and nothing of the collector above it:
a connection's identity (``Session``), the request context, the interfaces the network
layer and the request pipeline meet through, the clock."""

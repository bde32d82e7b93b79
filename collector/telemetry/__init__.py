"""KIP-714's broker side: the ClientMetricsManager port, payload checks, the subscription
source."""

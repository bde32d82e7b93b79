"""What the standalone node answers: the Kafka APIs (ApiVersions, Metadata, 71/72) and the
admin APIs (configs and client quotas), at the versions it serves."""

"""What the responses passing by tell the gateway of the upstream cluster (its
:class:`~collector.gateway.cluster.ClusterView`):

| API | learned |
|---|---|
| Metadata | the cluster id; each topic's partition count (what CreatePartitions and DeleteTopics charge to the mutation quota) |
| DescribeCluster | the cluster id |

The response passes on unchanged; which brokers it names (and their gateway ports) is
``RewriteAddresses``' part, since it needs them to rewrite."""

from __future__ import annotations

from collector.gateway import requests
from collector.gateway.filters.base import Body, Exchange, Filter
from proto import ApiKeys
from proto.messages import describe_cluster_response, metadata_response

__all__ = ["LearnCluster"]


class LearnCluster(Filter):
    __slots__ = ()

    def on_response(self, exchange: Exchange, body: Body) -> Body:
        frame = exchange.frame
        version = frame.api_version
        cluster = self.services.cluster
        if frame.api_key == ApiKeys.METADATA:
            metadata, _ = metadata_response.READERS[version](body, 0)
            cluster.learn_cluster_id(metadata.cluster_id)
            cluster.partition_counts.update(requests.partition_counts(metadata))
        elif frame.api_key == ApiKeys.DESCRIBE_CLUSTER:
            described, _ = describe_cluster_response.READERS[version](body, 0)
            cluster.learn_cluster_id(described.cluster_id)
        return body

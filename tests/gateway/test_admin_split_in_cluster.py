"""AdminSplitter with the subscriptions kept in the cluster: nothing is answered here, the
three admin APIs are forwarded untouched (their versions are the cluster's), and a
forwarded IncrementalAlterConfigs naming CLIENT_METRICS makes the node read the cluster's
subscriptions again once the cluster answered."""

from __future__ import annotations

from typing import Any

from collector.gateway.admin_split import AdminSplitter
from proto import ApiKeys, ServerConnection, encode_request, encode_response
from proto.messages import (
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)
from proto.messages.describe_configs_request import DescribeConfigsResource
from proto.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
)
from proto.messages.incremental_alter_configs_response import (
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsResponse,
)

TOPIC, CLIENT_METRICS = 2, 16


def frame(api_key: int, version: int, message: Any) -> Any:
    wire = encode_request(api_key, version, 7, "test", message)
    codec = ServerConnection(max_request_size=1 << 20)
    codec.receive_data(wire)
    return codec.next_request()


def never_answer(*_: Any) -> bytes:
    raise AssertionError("nothing is answered by the gateway")


def alter(resource_type: int) -> Any:
    return frame(
        ApiKeys.INCREMENTAL_ALTER_CONFIGS,
        1,
        IncrementalAlterConfigsRequest(
            resources=(
                AlterConfigsResource(
                    resource_type=resource_type,
                    resource_name="n",
                    configs=(AlterableConfig(name="interval.ms", value="1000"),),
                ),
            )
        ),
    )


def test_in_the_cluster_everything_is_forwarded_and_an_alter_reads_again() -> None:
    altered: list[bool] = []
    splitter = AdminSplitter(
        never_answer,
        1 << 20,
        in_cluster=lambda: True,
        altered_in_cluster=lambda: altered.append(True),
    )
    describe = frame(
        ApiKeys.DESCRIBE_CONFIGS,
        4,
        DescribeConfigsRequest(
            resources=(
                DescribeConfigsResource(
                    resource_type=CLIENT_METRICS, resource_name="n"
                ),
            )
        ),
    )
    assert splitter.split(describe, None, None) is None
    assert splitter.split(alter(TOPIC), None, None) is None
    request = alter(CLIENT_METRICS)
    split = splitter.split(request, None, None)
    assert isinstance(split, tuple)
    state, forwarded = split
    assert forwarded == request.raw  # untouched
    answer = IncrementalAlterConfigsResponse(
        responses=(
            AlterConfigsResourceResponse(
                error_code=42,
                error_message="Invalid value 50 for interval.ms",
                resource_type=CLIENT_METRICS,
                resource_name="n",
            ),
        )
    )
    wire = encode_response(ApiKeys.INCREMENTAL_ALTER_CONFIGS, 1, 7, answer)
    payload = wire[4:]
    assert not altered
    body = splitter.merge(state, request, payload)
    assert altered == [True]
    assert (
        payload.endswith(body) and len(payload) - len(body) == 5
    )  # v1 header: flexible


def test_in_the_cluster_the_admin_apis_keep_the_clusters_versions() -> None:
    local: dict[int, tuple[int, int]] = {
        ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS: (0, 0),
        ApiKeys.DESCRIBE_CONFIGS: (1, 4),
        ApiKeys.INCREMENTAL_ALTER_CONFIGS: (0, 1),
        ApiKeys.LIST_CONFIG_RESOURCES: (0, 1),
    }
    in_cluster = AdminSplitter(never_answer, 1 << 20, in_cluster=lambda: True)
    assert in_cluster.answered_versions(local) == {
        ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS: (0, 0)
    }
    local_store = AdminSplitter(never_answer, 1 << 20, in_cluster=lambda: False)
    assert local_store.answered_versions(local) == local

"""``ktc acls add|list|remove`` (kafka-acls.sh's flags and output) and the durable ACL file
(config/acls.yaml): written atomically, read back, a bad file refused whole, hot reload."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from click.testing import CliRunner

from collector.app.cli import cli
from collector.security.acls import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from collector.security.acls_file import ACLS_FILE, DurableAclStore
from subscriptions.config_file import ConfigFileError

PATTERN = (
    "ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)"
)


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def cluster_acl(
    principal: str,
    operation: AclOperation,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    host: str = "*",
) -> AclBinding:
    return AclBinding(
        ResourceType.CLUSTER,
        "kafka-cluster",
        PatternType.LITERAL,
        principal,
        host,
        operation,
        permission,
    )


def test_add_list_remove(tmp_path: Path) -> None:
    data = str(tmp_path)
    code, out, _ = run(
        "acls",
        "add",
        "--data-dir",
        data,
        "--allow-principal",
        "User:CN=ops",
        "--allow-principal",
        "User:bob",
        "--operation",
        "AlterConfigs",
        "--operation",
        "Describe",
        "--cluster",
    )
    assert code == 0
    assert out.startswith(
        f"Adding ACLs for resource `{PATTERN}`: \n"
        " \t(principal=User:CN=ops, host=*, operation=ALTER_CONFIGS, "
        "permissionType=ALLOW) \n"
    )
    assert f"Current ACLs for resource `{PATTERN}`: " in out
    assert DurableAclStore(tmp_path).bindings() == (
        cluster_acl("User:CN=ops", AclOperation.ALTER_CONFIGS),
        cluster_acl("User:CN=ops", AclOperation.DESCRIBE),
        cluster_acl("User:bob", AclOperation.ALTER_CONFIGS),
        cluster_acl("User:bob", AclOperation.DESCRIBE),
    )
    code, out, _ = run(
        "acls",
        "add",
        "--data-dir",
        data,
        "--deny-principal",
        "User:*",
        "--deny-host",
        "10.0.0.9",
        "--operation",
        "ALTER_CONFIGS",
        "--cluster",
    )
    assert code == 0
    assert (
        cluster_acl(
            "User:*", AclOperation.ALTER_CONFIGS, AclPermissionType.DENY, "10.0.0.9"
        )
        in DurableAclStore(tmp_path).bindings()
    )

    code, out, _ = run("acls", "list", "--data-dir", data, "--principal", "User:bob")
    assert code == 0
    assert out == (
        f"Current ACLs for resource `{PATTERN}`: \n"
        " \t(principal=User:bob, host=*, operation=ALTER_CONFIGS, permissionType=ALLOW) \n"
        " \t(principal=User:bob, host=*, operation=DESCRIBE, permissionType=ALLOW) \n\n"
    )

    code, out, _ = run(
        "acls",
        "remove",
        "--data-dir",
        data,
        "--cluster",
        "--allow-principal",
        "User:bob",
    )
    assert code == 0 and "Removing ACLs from resource" in out
    assert [b.principal for b in DurableAclStore(tmp_path).bindings()] == [
        "User:CN=ops",
        "User:CN=ops",
        "User:*",
    ]
    code, out, _ = run("acls", "remove", "--data-dir", data, "--cluster")
    assert code == 0
    assert DurableAclStore(tmp_path).bindings() == ()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--allow-principal", "bob", "--operation", "Alter", "--cluster"),
            "expected a string in format principalType:principalName but got bob",
        ),
        (
            ("--allow-principal", "User:bob", "--operation", "Fly", "--cluster"),
            "Fly is not a valid operation",
        ),
        (
            ("--allow-principal", "User:bob", "--operation", "Alter"),
            "--cluster is required",
        ),
        (
            (
                "--allow-principal",
                "User:bob",
                "--operation",
                "Alter",
                "--cluster",
                "--resource-pattern-type",
                "MATCH",
            ),
            "Invalid patternType MATCH",
        ),
    ],
)
def test_add_refuses_what_kafka_refuses(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    code, _, err = run("acls", "add", "--data-dir", str(tmp_path), *args)
    assert code != 0 and message in err
    assert DurableAclStore(tmp_path).bindings() == ()


def test_the_file_is_hand_editable_and_refused_whole_when_bad(tmp_path: Path) -> None:
    path = tmp_path / "config" / ACLS_FILE
    path.parent.mkdir(parents=True)
    path.write_text(
        "acls:\n  cluster:prefixed:kafka-cluster:\n"
        "    - {principal: 'User:x', host: '*', operation: alter, permission: deny}\n"
    )
    assert DurableAclStore(tmp_path).bindings() == (
        AclBinding(
            ResourceType.CLUSTER,
            "kafka-cluster",
            PatternType.PREFIXED,
            "User:x",
            "*",
            AclOperation.ALTER,
            AclPermissionType.DENY,
        ),
    )
    for bad, problem in (
        (
            "acls:\n  CLUSTER:LITERAL:other:\n"
            "    - {principal: 'User:x', host: '*', operation: ALTER, permission: DENY}\n",
            "The only valid name for the CLUSTER resource is kafka-cluster",
        ),
        (
            "acls:\n  TOPIC:LITERAL:t:\n"
            "    - {principal: 'User:x', host: '*', operation: ALTER, permission: DENY}\n",
            "resource type TOPIC is not supported by the collector",
        ),
        (
            "acls:\n  CLUSTER:LITERAL:kafka-cluster:\n    - {principal: 'User:x'}\n",
            "each entry has exactly principal, host, operation, permission",
        ),
        (
            "acls:\n  CLUSTER:LITERAL:kafka-cluster:\n"
            "    - {principal: 'User:x', host: '*', operation: ANY, permission: DENY}\n",
            "unknown operation or permission",
        ),
    ):
        path.write_text(bad)
        with pytest.raises(ConfigFileError, match=problem):
            DurableAclStore(tmp_path)


async def test_a_hand_edit_is_picked_up_and_a_bad_one_keeps_the_last_good(
    tmp_path: Path,
) -> None:
    store = DurableAclStore(tmp_path)
    changed, ready, stop = asyncio.Event(), asyncio.Event(), asyncio.Event()
    watcher = asyncio.create_task(
        store.watch(changed.set, stop, debounce_ms=10, ready=ready)
    )
    await asyncio.wait_for(ready.wait(), 10)
    DurableAclStore(tmp_path).create([cluster_acl("User:eve", AclOperation.ALTER)])
    await asyncio.wait_for(changed.wait(), 10)
    assert store.bindings() == (cluster_acl("User:eve", AclOperation.ALTER),)
    stop.set()
    await asyncio.wait_for(watcher, 10)
    store.path.write_text("acls: [not, a, mapping]\n")
    assert store.reload() is False
    assert store.last_error is not None and "expected a mapping" in store.last_error
    assert store.bindings() == (cluster_acl("User:eve", AclOperation.ALTER),)

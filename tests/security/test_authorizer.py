"""StandardAuthorizer matching rules, table-driven from Kafka's StandardAuthorizerTest
(testFindResultImplication, testFindResultPrincipalMatching, testSimpleAuthorizations,
testDenyPrecedenceWithOperationAll, testTopicAclWithOperationAll, testHostAddressAclValidation,
testAuthorizationWithManyAcls, testPrefixAcls, testAllowEveryoneIfNoAclFound*,
testGetConfiguredSuperUsers) and the CLUSTER checks the collector makes."""

from __future__ import annotations

import pytest

from collector.core.session import Session
from collector.security.acl_store import AclStore
from collector.security.acls import (
    AclBinding,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from collector.security.authorizer import StandardAuthorizer, parse_super_users

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation
LOCALHOST = "127.0.0.1"


def acl(rtype, name, ptype, principal, host, op, perm) -> AclBinding:
    return AclBinding(rtype, name, ptype, principal, host, op, perm)


def foo_acl(op, perm):  # StandardAuthorizerTest.newFooAcl
    return acl(TOPIC, "foo_", PREFIXED, "User:bob", "*", op, perm)


def bar_acl(op, perm):  # StandardAuthorizerTest.newBarAcl
    return acl(GROUP, "bar", LITERAL, "User:*", "*", op, perm)


def session(user: str, host: str = LOCALHOST, principal_type: str = "User") -> Session:
    return Session(
        1,
        "SSL",
        "SSL",
        principal=f"{principal_type}:{user}",
        peer_ip=host,
        client_source_address=host,
    )


def authorizer(acls, **kwargs) -> StandardAuthorizer:
    return StandardAuthorizer(AclStore(acls), **kwargs)


# (acls, principal, host, [(operation, resource type, name, allowed)])
MANY_ACLS = [
    acl(TOPIC, "green2", LITERAL, "User:*", "*", Op.READ, ALLOW),
    acl(TOPIC, "green", PREFIXED, "User:bob", "*", Op.READ, ALLOW),
    acl(TOPIC, "betamax4", LITERAL, "User:bob", "*", Op.READ, ALLOW),
    acl(TOPIC, "betamax", LITERAL, "User:bob", "*", Op.READ, ALLOW),
    acl(TOPIC, "beta", PREFIXED, "User:*", "*", Op.READ, ALLOW),
    acl(TOPIC, "alpha", PREFIXED, "User:*", "*", Op.READ, ALLOW),
    acl(TOPIC, "alp", PREFIXED, "User:bob", "*", Op.READ, DENY),
    acl(GROUP, "*", LITERAL, "User:bob", "*", Op.WRITE, ALLOW),
    acl(GROUP, "wheel", LITERAL, "User:*", "*", Op.WRITE, DENY),
]
DENY_PRECEDENCE = [
    acl(TOPIC, "foo", LITERAL, "User:alice", "*", Op.ALL, DENY),
    acl(TOPIC, "foo", PREFIXED, "User:alice", "*", Op.READ, ALLOW),
    acl(TOPIC, "foo", LITERAL, "User:*", "*", Op.ALL, DENY),
    acl(TOPIC, "foo", PREFIXED, "User:*", "*", Op.DESCRIBE, ALLOW),
]
OPERATION_ALL = [
    acl(TOPIC, "foo", LITERAL, "User:*", "*", Op.ALL, ALLOW),
    acl(TOPIC, "bar", PREFIXED, "User:alice", "*", Op.ALL, ALLOW),
    acl(TOPIC, "baz", LITERAL, "User:bob", "*", Op.ALL, ALLOW),
]
PREFIXES = [
    acl(TOPIC, "fooa", PREFIXED, "User:alice", "*", Op.ALL, ALLOW),
    acl(TOPIC, "foobar", LITERAL, "User:bob", "*", Op.ALL, ALLOW),
    acl(TOPIC, "f", PREFIXED, "User:bob", "*", Op.ALL, ALLOW),
]
HOST1, HOST2 = "192.168.1.1", "192.168.1.2"
HOSTS = [
    acl(TOPIC, "foo", LITERAL, "User:alice", HOST1, Op.READ, DENY),
    acl(TOPIC, "foo", LITERAL, "User:alice", "*", Op.READ, ALLOW),
    acl(TOPIC, "bar", LITERAL, "User:bob", HOST2, Op.READ, ALLOW),
    acl(TOPIC, "bar", LITERAL, "User:*", LOCALHOST, Op.DESCRIBE, ALLOW),
]
HOST_ACTIONS = [
    (Op.READ, TOPIC, "foo"),
    (Op.READ, TOPIC, "bar"),
    (Op.DESCRIBE, TOPIC, "bar"),
]

CASES = [
    # testFindResultImplication: an ALLOW of these implies DESCRIBE ...
    *[
        (
            [foo_acl(op, ALLOW)],
            "bob",
            LOCALHOST,
            [(Op.DESCRIBE, TOPIC, "foo_bar", True)],
        )
        for op in (Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER)
    ],
    (
        [foo_acl(Op.CREATE, ALLOW)],
        "bob",
        LOCALHOST,
        [(Op.DESCRIBE, TOPIC, "foo_bar", False)],
    ),
    # ... a DENY implies nothing (the DESCRIBE is not denied by it: no match, default deny,
    # but an ALLOW DESCRIBE next to it still allows)
    *[
        (
            [foo_acl(op, DENY), foo_acl(Op.DESCRIBE, ALLOW)],
            "bob",
            LOCALHOST,
            [(Op.DESCRIBE, TOPIC, "foo_bar", True)],
        )
        for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER)
    ],
    (
        [foo_acl(Op.DESCRIBE, DENY)],
        "bob",
        LOCALHOST,
        [(Op.DESCRIBE, TOPIC, "foo_bar", False)],
    ),
    *[
        (
            [foo_acl(op, ALLOW)],
            "bob",
            LOCALHOST,
            [(Op.DESCRIBE_CONFIGS, TOPIC, "foo_bar", True)],
        )
        for op in (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS)
    ],
    (
        [foo_acl(Op.ALTER_CONFIGS, DENY), foo_acl(Op.DESCRIBE_CONFIGS, ALLOW)],
        "bob",
        LOCALHOST,
        [
            (Op.DESCRIBE_CONFIGS, TOPIC, "foo_bar", True),
            (Op.ALTER_CONFIGS, TOPIC, "foo_bar", False),
        ],
    ),
    # ALTER_CONFIGS does not imply ALTER, nor DESCRIBE_CONFIGS ALTER_CONFIGS
    (
        [foo_acl(Op.ALTER_CONFIGS, ALLOW)],
        "bob",
        LOCALHOST,
        [(Op.ALTER, TOPIC, "foo_bar", False)],
    ),
    (
        [foo_acl(Op.DESCRIBE_CONFIGS, ALLOW)],
        "bob",
        LOCALHOST,
        [(Op.ALTER_CONFIGS, TOPIC, "foo_bar", False)],
    ),
    # testFindResultPrincipalMatching
    ([foo_acl(Op.READ, ALLOW)], "bob", LOCALHOST, [(Op.READ, TOPIC, "foo_bar", True)]),
    (
        [foo_acl(Op.READ, ALLOW)],
        "alice",
        LOCALHOST,
        [(Op.READ, TOPIC, "foo_bar", False)],
    ),
    (
        [bar_acl(Op.READ, DENY), bar_acl(Op.ALL, ALLOW)],
        "alice",
        LOCALHOST,
        [(Op.READ, GROUP, "bar", False), (Op.WRITE, GROUP, "bar", True)],
    ),
    # testSimpleAuthorizations
    (
        [
            foo_acl(Op.READ, ALLOW),
            foo_acl(Op.WRITE, ALLOW),
            bar_acl(Op.DESCRIBE_CONFIGS, ALLOW),
            bar_acl(Op.ALTER_CONFIGS, ALLOW),
        ],
        "bob",
        LOCALHOST,
        [(Op.READ, TOPIC, "foo_", True), (Op.ALTER_CONFIGS, GROUP, "bar", True)],
    ),
    # testDenyPrecedenceWithOperationAll
    (
        DENY_PRECEDENCE,
        "alice",
        LOCALHOST,
        [
            (Op.WRITE, TOPIC, "foo", False),
            (Op.READ, TOPIC, "foo", False),
            (Op.DESCRIBE, TOPIC, "foo", False),
            (Op.READ, TOPIC, "foobar", True),
        ],
    ),
    (
        DENY_PRECEDENCE,
        "bob",
        LOCALHOST,
        [
            (Op.DESCRIBE, TOPIC, "foo", False),
            (Op.READ, TOPIC, "foo", False),
            (Op.WRITE, TOPIC, "foo", False),
            (Op.DESCRIBE, TOPIC, "foobaz", True),
            (Op.READ, TOPIC, "foobaz", False),
        ],
    ),
    # testTopicAclWithOperationAll
    (
        OPERATION_ALL,
        "alice",
        LOCALHOST,
        [
            (Op.WRITE, TOPIC, "foo", True),
            (Op.DESCRIBE_CONFIGS, TOPIC, "bar", True),
            (Op.DESCRIBE, TOPIC, "baz", False),
        ],
    ),
    (
        OPERATION_ALL,
        "bob",
        LOCALHOST,
        [
            (Op.WRITE, TOPIC, "foo", True),
            (Op.READ, TOPIC, "bar", False),
            (Op.DESCRIBE, TOPIC, "baz", True),
        ],
    ),
    (
        OPERATION_ALL,
        "malory",
        LOCALHOST,
        [
            (Op.DESCRIBE, TOPIC, "foo", True),
            (Op.WRITE, TOPIC, "bar", False),
            (Op.READ, TOPIC, "baz", False),
        ],
    ),
    # testHostAddressAclValidation
    *[
        (
            HOSTS,
            user,
            host,
            [
                (*action, allowed)
                for action, allowed in zip(HOST_ACTIONS, results, strict=True)
            ],
        )
        for user, host, results in [
            ("alice", LOCALHOST, (True, False, True)),
            ("alice", HOST1, (False, False, False)),
            ("alice", HOST2, (True, False, False)),
            ("bob", LOCALHOST, (False, False, True)),
            ("bob", HOST1, (False, False, False)),
            ("bob", HOST2, (False, True, True)),
        ]
    ],
    # testAuthorizationWithManyAcls
    (
        MANY_ACLS,
        "bob",
        LOCALHOST,
        [
            (Op.READ, TOPIC, "green1", True),
            (Op.WRITE, GROUP, "wheel", False),
            (Op.READ, TOPIC, "alpha", False),
            (Op.WRITE, GROUP, "arbitrary", True),
            (Op.READ, TOPIC, "ala", False),
        ],
    ),
    # testPrefixAcls
    (
        PREFIXES,
        "bob",
        LOCALHOST,
        [
            (Op.WRITE, TOPIC, "foobarr", True),
            (Op.READ, TOPIC, "goobar", False),
            (Op.READ, TOPIC, "fooa", True),
        ],
    ),
    (
        PREFIXES,
        "alice",
        LOCALHOST,
        [
            (Op.DESCRIBE, TOPIC, "fooa", True),
            (Op.WRITE, TOPIC, "bar", False),
            (Op.READ, TOPIC, "baz", False),
        ],
    ),
]


@pytest.mark.parametrize("index", range(len(CASES)))
def test_kafka_matching_rules(index: int) -> None:
    acls, user, host, checks = CASES[index]
    auth = authorizer(acls)
    got = [
        auth.authorize(session(user, host), op, rtype, name)
        for op, rtype, name, _ in checks
    ]
    assert got == [allowed for *_, allowed in checks]


def test_principal_type_is_part_of_the_principal() -> None:
    auth = authorizer([foo_acl(Op.READ, ALLOW), bar_acl(Op.READ, ALLOW)])
    assert not auth.authorize(
        session("bob", principal_type="Group"), Op.READ, TOPIC, "foo_1"
    )
    # User:* is in every session's matching principals, whatever its type
    # (StandardAuthorizerData.matchingPrincipals: {the principal, User:*})
    assert auth.authorize(session("x", principal_type="Group"), Op.READ, GROUP, "bar")
    assert auth.authorize(session("x"), Op.READ, GROUP, "bar")


@pytest.mark.parametrize("allow_everyone, topic2", [(True, True), (False, False)])
def test_allow_everyone_if_no_acl_found(allow_everyone: bool, topic2: bool) -> None:
    auth = authorizer(
        [acl(TOPIC, "topic1", LITERAL, "User:Alice", "*", Op.READ, ALLOW)],
        super_users=parse_super_users("User:alice;User:chris"),
        allow_everyone_if_no_acl_found=allow_everyone,
    )
    # ACLs apply to topic1 but none matches Bob: denied either way.
    assert not auth.authorize(session("Bob"), Op.READ, TOPIC, "topic1")
    assert auth.authorize(session("Bob"), Op.READ, TOPIC, "topic2") is topic2


def test_super_users_are_never_denied() -> None:
    auth = authorizer(
        [acl(CLUSTER, "kafka-cluster", LITERAL, "User:*", "*", Op.ALL, DENY)],
        super_users=parse_super_users(" User:admin ; ;User:CN=ops,O=example "),
    )
    for user in ("admin", "CN=ops,O=example"):
        for op in (Op.ALTER, Op.ALTER_CONFIGS, Op.DESCRIBE, Op.DESCRIBE_CONFIGS):
            assert auth.authorize(session(user), op)
    assert not auth.authorize(session("alice"), Op.DESCRIBE)


def test_configured_super_users() -> None:  # testGetConfiguredSuperUsers
    assert parse_super_users("") == frozenset()
    assert parse_super_users(" ") == frozenset()
    assert parse_super_users("User:bob;User:alice") == {"User:bob", "User:alice"}
    assert parse_super_users("User:bob; User:alice ") == {"User:bob", "User:alice"}
    with pytest.raises(
        AclError, match="expected a string in format principalType:principalName"
    ):
        parse_super_users("User:bob;;alice")


def test_cluster_acls_for_the_collector_admin_apis() -> None:
    cluster = [
        acl(
            CLUSTER,
            "kafka-cluster",
            LITERAL,
            "User:CN=ops",
            "*",
            Op.ALTER_CONFIGS,
            ALLOW,
        ),
        acl(
            CLUSTER, "kafka-cluster", LITERAL, "User:CN=viewer", "*", Op.DESCRIBE, ALLOW
        ),
    ]
    auth = authorizer(cluster)
    ops, viewer, nobody = session("CN=ops"), session("CN=viewer"), session("CN=nobody")
    assert auth.authorize(ops, Op.ALTER_CONFIGS) and auth.authorize(
        ops, Op.DESCRIBE_CONFIGS
    )
    assert not auth.authorize(ops, Op.ALTER) and not auth.authorize(ops, Op.DESCRIBE)
    assert auth.authorize(viewer, Op.DESCRIBE) and not auth.authorize(
        viewer, Op.DESCRIBE_CONFIGS
    )
    assert not any(auth.authorize(nobody, op) for op in (Op.ALTER, Op.DESCRIBE_CONFIGS))


def test_a_change_to_the_store_is_in_force_at_once() -> None:
    store = AclStore()
    auth = StandardAuthorizer(store)
    alice = session("alice")
    assert not auth.authorize(alice, Op.ALTER_CONFIGS)
    binding = acl(
        CLUSTER, "kafka-cluster", LITERAL, "User:alice", "*", Op.ALTER_CONFIGS, ALLOW
    )
    assert store.create([binding]) == [None]
    assert auth.authorize(alice, Op.ALTER_CONFIGS)
    from collector.security.acls import AclBindingFilter

    assert store.delete([AclBindingFilter(principal="User:alice")]) == [[binding]]
    assert not auth.authorize(alice, Op.ALTER_CONFIGS)

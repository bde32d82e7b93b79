"""The durable ACL store: ``<data-dir>/config/acls.yaml``.

Kept like the subscriptions, quotas and credentials next to it: written atomically (temp
file, fsync, rename, directory fsync; ``subscriptions.config_file``), hand-editable,
hot-reloaded when the directory changes or on SIGHUP (``subscriptions.config_watch``), a
file that does not validate rejected whole (at start-up an error, on reload the last good
ACLs stay in force).  One entry per resource pattern, ``TYPE:PATTERN_TYPE:NAME``::

    acls:
      CLUSTER:LITERAL:kafka-cluster:
        - {principal: "User:CN=ops", host: "*", operation: ALTER_CONFIGS, permission: ALLOW}
        - {principal: "User:*", host: "*", operation: DESCRIBE_CONFIGS, permission: ALLOW}
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from collector.security.acl_store import AclStore
from collector.security.acls import (
    AclBinding,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    validate_new_acl,
)
from subscriptions.config_file import ConfigDocument, Located
from subscriptions.durable_store import DurableDocumentStore

__all__ = ["ACLS_FILE", "AclsDocument", "DurableAclStore"]

ACLS_FILE = "acls.yaml"

Acls = list[AclBinding]

_ENTRY_KEYS = ("principal", "host", "operation", "permission")


class AclsDocument(ConfigDocument[Acls]):
    filename = ACLS_FILE
    top_key = "acls"
    header = (
        "# ACLs (Kafka's StandardAuthorizer model). Managed with `ktc acls` or\n"
        "# kafka-acls.sh; reloaded on change or SIGHUP. Keys: TYPE:PATTERN_TYPE:NAME.\n"
    )

    def empty(self) -> Acls:
        return []

    def parse_entries(self, entries: Mapping[Any, Located]) -> Acls:
        acls: Acls = []
        for key, located in entries.items():
            parts = str(key).split(":", 2)
            if len(parts) != 3:
                raise self.fail(
                    located.line, str(key), "expected TYPE:PATTERN_TYPE:NAME"
                )
            resource_type = _member(ResourceType, parts[0])
            pattern_type = _member(PatternType, parts[1])
            if resource_type is None or pattern_type is None:
                raise self.fail(
                    located.line, str(key), "unknown resource or pattern type"
                )
            body = located.value
            if body is None:
                continue
            if not isinstance(body, list):
                raise self.fail(located.line, str(key), "expected a list of entries")
            for item in body:
                if not isinstance(item, dict) or set(item) != set(_ENTRY_KEYS):
                    raise self.fail(
                        located.line,
                        str(key),
                        "each entry has exactly " + ", ".join(_ENTRY_KEYS),
                    )
                values = {name: item[name].value for name in _ENTRY_KEYS}
                if not all(isinstance(value, str) for value in values.values()):
                    raise self.fail(
                        located.line, str(key), "entry values must be strings"
                    )
                operation = _member(AclOperation, values["operation"])
                permission = _member(AclPermissionType, values["permission"])
                if operation is None or permission is None:
                    raise self.fail(
                        item["operation"].line,
                        str(key),
                        "unknown operation or permission",
                    )
                binding = AclBinding(
                    ResourceType(resource_type),
                    parts[2],
                    PatternType(pattern_type),
                    values["principal"],
                    values["host"],
                    AclOperation(operation),
                    AclPermissionType(permission),
                )
                try:
                    validate_new_acl(binding)
                except AclError as exc:
                    raise self.fail(
                        item["principal"].line, str(key), str(exc)
                    ) from None
                acls.append(binding)
        return acls

    def render(self, state: Acls) -> dict[str, Any]:
        out: dict[str, list[dict[str, str]]] = {}
        for binding in state:
            out.setdefault(binding.pattern_key, []).append(
                {
                    "principal": binding.principal,
                    "host": binding.host,
                    "operation": binding.operation.name,
                    "permission": binding.permission.name,
                }
            )
        return out


def _member(kind: Any, name: str) -> Any:
    member = kind.__members__.get(str(name).upper())
    return (
        None if member is None or member.name in ("UNKNOWN", "ANY", "MATCH") else member
    )


class DurableAclStore(AclStore, DurableDocumentStore[Acls]):
    """The ACL store backed by ``<data_dir>/config/acls.yaml``.  The constructor loads the
    file (raising ConfigFileError if it is invalid): a bad file fails start-up, and no
    write can replace a file that was never read."""

    what = "ACL"

    def __init__(self, data_dir: str | Path) -> None:
        DurableDocumentStore.__init__(self, data_dir, AclsDocument)
        AclStore.__init__(self, self.read_document())

    def reload(self) -> bool:
        """Re-read the file; True if the ACLs changed (DurableDocumentStore.reload)."""
        with self._lock:
            return DurableDocumentStore.reload(self)

    def in_force(self, state: Acls) -> bool:
        return tuple(dict.fromkeys(state)) == self._bindings

    def put_in_force(self, state: Acls) -> None:
        self.replace(state)

    def described(self) -> str:
        return f"{len(self._bindings)} ACLs (version {self.version})"

    def _commit(self, bindings: tuple[AclBinding, ...]) -> None:
        self.save_document(list(bindings))
        self.replace(bindings)

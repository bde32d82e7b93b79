"""The ACLs in force, created and deleted as Kafka's ``AclControlManager`` does.

``create`` validates each binding on its own (a bad one fails alone, the others are
created), and creating an ACL that exists is a success that adds nothing; ``delete``
removes every ACL each filter matches and reports them.  The durable store
(``collector/security/acls_file.py``) persists every change before putting it in force.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

from collector.security.acls import (
    AclBinding,
    AclBindingFilter,
    AclError,
    validate_new_acl,
)

__all__ = ["AclStore"]


class AclStore:
    """Thread-safe; ``bindings()`` is a tuple replaced whole on every change (a reader
    never sees half of one)."""

    def __init__(self, bindings: Iterable[AclBinding] = ()) -> None:
        self._lock = threading.RLock()
        self._bindings: tuple[AclBinding, ...] = tuple(dict.fromkeys(bindings))
        self.version = 0

    def bindings(self) -> tuple[AclBinding, ...]:
        return self._bindings

    def acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return [binding for binding in self._bindings if acl_filter.matches(binding)]

    def create(self, bindings: Sequence[AclBinding]) -> list[AclError | None]:
        """One result per binding: None (created, or already there) or why not."""
        results: list[AclError | None] = []
        with self._lock:
            current = dict.fromkeys(self._bindings)
            for binding in bindings:
                try:
                    validate_new_acl(binding)
                except AclError as exc:
                    results.append(exc)
                    continue
                current.setdefault(binding)
                results.append(None)
            if len(current) != len(self._bindings):
                self._commit(tuple(current))
        return results

    def delete(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """Per filter, the ACLs it matched (all of them removed, atomically)."""
        with self._lock:
            matched = [self.acls(acl_filter) for acl_filter in filters]
            removed = {binding for bindings in matched for binding in bindings}
            if removed:
                self._commit(tuple(b for b in self._bindings if b not in removed))
        return matched

    def replace(self, bindings: Iterable[AclBinding]) -> None:
        with self._lock:
            self._bindings = tuple(dict.fromkeys(bindings))
            self.version += 1

    def _commit(self, bindings: tuple[AclBinding, ...]) -> None:
        """Put a change in force (the durable store persists it first)."""
        self.replace(bindings)

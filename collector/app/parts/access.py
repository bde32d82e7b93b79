"""Who may do what on a node: Kafka's StandardAuthorizer over ``config/acls.yaml`` when
``authorizer.class.name`` is set (any value: the collector has this one)."""

from __future__ import annotations

import logging

from collector.app.config import CollectorConfig
from collector.app.parts.errors import StartupError
from collector.security.acls_file import DurableAclStore
from collector.security.authorizer import StandardAuthorizer, parse_super_users

__all__ = ["open_authorizer"]

log = logging.getLogger(__name__)


def open_authorizer(
    config: CollectorConfig,
) -> tuple[DurableAclStore, StandardAuthorizer] | None:
    """The ACL store and the authorizer over it; None without ``authorizer.class.name``."""
    if not config.authorizer_class_name:
        return None
    try:
        acls = DurableAclStore(config.data_dir)
        super_users = parse_super_users(config.super_users)
    except Exception as exc:
        raise StartupError(f"authorizer: {exc}") from exc
    log.info(
        "authorizer %s: %d ACLs, super.users=%s, allow.everyone.if.no.acl.found=%s",
        config.authorizer_class_name,
        len(acls.bindings()),
        ",".join(sorted(super_users)),
        config.allow_everyone_if_no_acl_found,
    )
    authorizer = StandardAuthorizer(
        acls,
        super_users=super_users,
        allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found,
    )
    return acls, authorizer

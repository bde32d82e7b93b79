"""Kafka's ACL APIs, so ``kafka-acls.sh`` and any AdminClient manage the collector's ACLs.

Semantics follow ``AclApis.scala`` (handleDescribeAcls / handleCreateAcls /
handleDeleteAcls) and the request classes' validation:

| API | authorized | behaviour |
|---|---|---|
| DescribeAcls (29) v1-3 | DESCRIBE on CLUSTER | the ACLs the filter matches, grouped by resource pattern |
| CreateAcls (30) v1-3 | ALTER on CLUSTER | each ACL validated alone (INVALID_REQUEST with Kafka's message); an existing ACL is a success |
| DeleteAcls (31) v1-3 | ALTER on CLUSTER | per filter, the ACLs it matched, all removed |

A request Kafka cannot parse (an UNKNOWN resource type, pattern type, operation or
permission, which is also what an out-of-range code reads as) closes the connection, as
Kafka's ``RequestContext.parseRequest`` failure does.  Without an authorizer
(``authorizer.class.name`` unset) every API answers SECURITY_DISABLED (54), as Kafka does.
A denied request answers CLUSTER_AUTHORIZATION_FAILED (31) with Kafka's
``Request ... is not authorized.`` message.
"""

from __future__ import annotations

import logging
from typing import Any

from collector.core.context import CloseConnection, RequestContext
from collector.pipeline.dispatch import Api
from collector.security.acls import (
    AclBinding,
    AclBindingFilter,
    AclError,
    AclInternalError,
    AclOperation,
)
from collector.security.authorizer import StandardAuthorizer
from proto import ApiKeys
from proto.errors import Errors
from proto.messages import create_acls_response as create_response
from proto.messages import delete_acls_response as delete_response
from proto.messages import describe_acls_response as describe_response
from proto.messages.create_acls_request import CreateAclsRequest
from proto.messages.delete_acls_request import DeleteAclsRequest
from proto.messages.describe_acls_request import DescribeAclsRequest

__all__ = ["AclApis", "not_authorized_message"]

log = logging.getLogger(__name__)

NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"
NO_AUTHORIZER = "No Authorizer is configured."


def not_authorized_message(
    ctx: RequestContext, operation: AclOperation | None = None
) -> str:
    """``ClusterAuthorizationException(s"Request $request is not authorized.")``, with the
    parts of Kafka's ``RequestChannel.Request`` string the collector has; for the ACL APIs,
    Kafka 4.4.0's ``AclApis`` words it ``... needs <OPERATION> permission.``."""
    session = ctx.session
    ending = (
        "is not authorized."
        if operation is None
        else f"needs {operation.name} permission."
    )
    return (
        f"Request Request(processor=0, connectionId={session.connection_id}, "
        f"session=Session({session.principal},/{session.client_source_address or session.peer_ip}), "
        f"listenerName=ListenerName({session.listener_name}), "
        f"securityProtocol={session.security_protocol}, buffer=null, envelope=None) "
        f"{ending}"
    )


class AclApis:
    def __init__(self, authorizer: StandardAuthorizer | None) -> None:
        self._authorizer = authorizer

    def table(self) -> dict[int, Api]:
        return {
            ApiKeys.DESCRIBE_ACLS: Api(
                "DescribeAcls",
                self.describe_acls,
                lambda _, err: describe_response.DescribeAclsResponse(
                    error_code=err, error_message=None, resources=()
                ),
            ),
            ApiKeys.CREATE_ACLS: Api(
                "CreateAcls",
                self.create_acls,
                lambda req, err: _create_failed(req, err, None),
            ),
            ApiKeys.DELETE_ACLS: Api(
                "DeleteAcls",
                self.delete_acls,
                lambda req, err: _delete_failed(req, err, None),
            ),
        }

    def _refusal(
        self,
        ctx: RequestContext,
        operation: AclOperation,
        name: str,
        no_authorizer_message: str,
    ) -> tuple[Errors, str] | None:
        """The error and message a request of the ACL APIs is answered with before it is
        served: the principal may not ``operation`` the cluster, or there is no authorizer
        to keep ACLs; None when it may be served."""
        if self._authorizer is None:
            return Errors.SECURITY_DISABLED, no_authorizer_message
        if not self._authorizer.authorize(ctx.session, operation, request_name=name):
            return (
                Errors.CLUSTER_AUTHORIZATION_FAILED,
                not_authorized_message(ctx, operation),
            )
        return None

    # ------------------------------------------------------------------ 29
    def describe_acls(
        self, request: DescribeAclsRequest, ctx: RequestContext
    ) -> describe_response.DescribeAclsResponse:
        acl_filter = AclBindingFilter.from_codes(
            request.resource_type_filter,
            request.resource_name_filter,
            request.pattern_type_filter,
            request.principal_filter,
            request.host_filter,
            request.operation,
            request.permission_type,
        )
        if acl_filter.is_unknown:
            raise CloseConnection(
                f"DescribeAclsRequest contains UNKNOWN elements: {acl_filter}"
            )
        refusal = self._refusal(
            ctx, AclOperation.DESCRIBE, "DescribeAcls", NO_AUTHORIZER_DESCRIBE
        )
        if refusal is not None:
            error, message = refusal
            return describe_response.DescribeAclsResponse(
                error_code=error, error_message=message, resources=()
            )
        assert self._authorizer is not None  # _refusal answers without one
        by_pattern: dict[tuple[int, str, int], list[AclBinding]] = {}
        for binding in self._authorizer.acls.acls(acl_filter):
            key = (binding.resource_type, binding.resource_name, binding.pattern_type)
            by_pattern.setdefault(key, []).append(binding)
        return describe_response.DescribeAclsResponse(
            error_code=Errors.NONE,
            error_message="",  # Kafka 4.4.0: ApiError.NONE's message
            resources=tuple(
                describe_response.DescribeAclsResource(
                    resource_type=resource_type,
                    resource_name=name,
                    pattern_type=pattern_type,
                    acls=tuple(
                        describe_response.AclDescription(
                            principal=b.principal,
                            host=b.host,
                            operation=b.operation,
                            permission_type=b.permission,
                        )
                        for b in bindings
                    ),
                )
                for (resource_type, name, pattern_type), bindings in by_pattern.items()
            ),
        )

    # ------------------------------------------------------------------ 30
    def create_acls(
        self, request: CreateAclsRequest, ctx: RequestContext
    ) -> create_response.CreateAclsResponse:
        bindings = [
            AclBinding.from_codes(
                c.resource_type,
                c.resource_name,
                c.resource_pattern_type,
                c.principal,
                c.host,
                c.operation,
                c.permission_type,
            )
            for c in request.creations
        ]
        if any(b.to_filter().is_unknown for b in bindings):
            raise CloseConnection("CreatableAcls contain unknown elements")
        refusal = self._refusal(ctx, AclOperation.ALTER, "CreateAcls", NO_AUTHORIZER)
        if refusal is not None:
            return _create_failed(request, *refusal)
        assert self._authorizer is not None  # _refusal answers without one
        results = self._authorizer.acls.create(bindings)
        for binding, error in zip(bindings, results, strict=True):
            if error is None:
                log.info("ACL created by %s: %s", ctx.session.principal, binding)
        return create_response.CreateAclsResponse(
            results=tuple(_creation_result(error) for error in results)
        )

    # ------------------------------------------------------------------ 31
    def delete_acls(
        self, request: DeleteAclsRequest, ctx: RequestContext
    ) -> delete_response.DeleteAclsResponse:
        filters = [
            AclBindingFilter.from_codes(
                f.resource_type_filter,
                f.resource_name_filter,
                f.pattern_type_filter,
                f.principal_filter,
                f.host_filter,
                f.operation,
                f.permission_type,
            )
            for f in request.filters
        ]
        if any(f.is_unknown for f in filters):
            raise CloseConnection("Filters contain UNKNOWN elements")
        refusal = self._refusal(ctx, AclOperation.ALTER, "DeleteAcls", NO_AUTHORIZER)
        if refusal is not None:
            return _delete_failed(request, *refusal)
        assert self._authorizer is not None  # _refusal answers without one
        matched = self._authorizer.acls.delete(filters)
        for bindings in matched:
            for binding in bindings:
                log.info("ACL deleted by %s: %s", ctx.session.principal, binding)
        return delete_response.DeleteAclsResponse(
            filter_results=tuple(
                delete_response.DeleteAclsFilterResult(
                    error_code=Errors.NONE,
                    error_message=None,
                    matching_acls=tuple(
                        delete_response.DeleteAclsMatchingAcl(
                            error_code=Errors.NONE,
                            error_message=None,
                            resource_type=b.resource_type,
                            resource_name=b.resource_name,
                            pattern_type=b.pattern_type,
                            principal=b.principal,
                            host=b.host,
                            operation=b.operation,
                            permission_type=b.permission,
                        )
                        for b in bindings
                    ),
                )
                for bindings in matched
            )
        )


def _create_failed(
    request: Any, error: Errors, message: str | None
) -> create_response.CreateAclsResponse:
    return create_response.CreateAclsResponse(
        results=tuple(
            create_response.AclCreationResult(error_code=error, error_message=message)
            for _ in request.creations
        )
    )


def _delete_failed(
    request: Any, error: Errors, message: str | None
) -> delete_response.DeleteAclsResponse:
    return delete_response.DeleteAclsResponse(
        filter_results=tuple(
            delete_response.DeleteAclsFilterResult(
                error_code=error, error_message=message, matching_acls=()
            )
            for _ in request.filters
        )
    )


def _creation_result(error: AclError | None) -> create_response.AclCreationResult:
    """One CreateAcls result as Kafka 4.4.0 words it: "" on success (ApiError.NONE's
    message), no message for what its controller fails on internally."""
    if error is None:
        return create_response.AclCreationResult(
            error_code=Errors.NONE, error_message=""
        )
    if isinstance(error, AclInternalError):
        return create_response.AclCreationResult(
            error_code=Errors.UNKNOWN_SERVER_ERROR, error_message=None
        )
    return create_response.AclCreationResult(
        error_code=Errors.INVALID_REQUEST, error_message=str(error)
    )

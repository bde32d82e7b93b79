"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51): SCRAM credentials
managed over the wire, so ``kafka-configs.sh --entity-type users`` and any AdminClient's
``describeUserScramCredentials`` / ``alterUserScramCredentials`` work unchanged.

Kafka's rules (errors, messages, the order of results) are in
``collector.security.scram_admin``, shared with ``ktc users``; this module maps the wire
messages onto them. An upsertion carries the client's salt and salted password, never the
password; the store keeps the stored and server keys derived from them.

With an authorizer (``authorizer.class.name``) each checks what Kafka checks: describing
needs DESCRIBE on the CLUSTER (``KafkaApis``: a denial answers CLUSTER_AUTHORIZATION_FAILED
at the top level with "Cluster authorization failed.", one result per named user), altering
needs ALTER on the CLUSTER (``ControllerApis``: every named user, sorted, gets
CLUSTER_AUTHORIZATION_FAILED with ``Request ... is not authorized.``).
"""

from __future__ import annotations

import logging

from collector.broker.acl_apis import not_authorized_message
from collector.broker.admin_apis import (
    CLUSTER_AUTHORIZATION_FAILED_MESSAGE,
    ClusterAuthorizer,
    cluster_allows,
)
from collector.core.context import RequestContext
from collector.pipeline.dispatch import Api
from collector.security.acls import AclOperation
from collector.security.credentials import CredentialStore
from collector.security.scram_admin import (
    CredentialDeletion,
    CredentialUpsertion,
    alter_credentials,
    describe_credentials,
)
from proto import ApiKeys
from proto.errors import Errors
from proto.messages import alter_user_scram_credentials_response as alter_response
from proto.messages import describe_user_scram_credentials_response as describe_response
from proto.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
)
from proto.messages.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
)

__all__ = ["ScramCredentialApis"]

log = logging.getLogger(__name__)


class ScramCredentialApis:
    def __init__(
        self, store: CredentialStore, authorizer: ClusterAuthorizer | None = None
    ) -> None:
        self._store = store
        self._authorizer = authorizer

    def table(self) -> dict[int, Api]:
        return {
            ApiKeys.DESCRIBE_USER_SCRAM_CREDENTIALS: Api(
                "DescribeUserScramCredentials",
                self.describe,
                lambda _, err: describe_response.DescribeUserScramCredentialsResponse(
                    error_code=err, error_message=None, results=()
                ),
            ),
            ApiKeys.ALTER_USER_SCRAM_CREDENTIALS: Api(
                "AlterUserScramCredentials",
                self.alter,
                lambda req, err: _alter_failed(req, err, None),
            ),
        }

    # ------------------------------------------------------------------ 50
    def describe(
        self, request: DescribeUserScramCredentialsRequest, ctx: RequestContext
    ) -> describe_response.DescribeUserScramCredentialsResponse:
        if not cluster_allows(
            self._authorizer, ctx, AclOperation.DESCRIBE, "DescribeUserScramCredentials"
        ):
            return describe_response.DescribeUserScramCredentialsResponse(
                error_code=Errors.CLUSTER_AUTHORIZATION_FAILED,
                error_message=CLUSTER_AUTHORIZATION_FAILED_MESSAGE,
                results=tuple(
                    describe_response.DescribeUserScramCredentialsResult(
                        user="",
                        error_code=Errors.CLUSTER_AUTHORIZATION_FAILED,
                        error_message=CLUSTER_AUTHORIZATION_FAILED_MESSAGE,
                    )
                    for _ in request.users or ()
                ),
            )
        users = None if request.users is None else [user.name for user in request.users]
        results = tuple(
            describe_response.DescribeUserScramCredentialsResult(
                user=result.user,
                error_code=result.error,
                # Kafka 4.4.0 words success as "" (ApiError.NONE's message)
                error_message=result.message if result.error else "",
                credential_infos=tuple(
                    describe_response.CredentialInfo(mechanism=m.type_id, iterations=i)
                    for m, i in result.credentials
                ),
            )
            for result in describe_credentials(self._store, users)
        )
        return describe_response.DescribeUserScramCredentialsResponse(
            error_code=Errors.NONE, error_message="", results=results
        )

    # ------------------------------------------------------------------ 51
    def alter(
        self, request: AlterUserScramCredentialsRequest, ctx: RequestContext
    ) -> alter_response.AlterUserScramCredentialsResponse:
        if not cluster_allows(
            self._authorizer, ctx, AclOperation.ALTER, "AlterUserScramCredentials"
        ):
            return _alter_failed(
                request,
                Errors.CLUSTER_AUTHORIZATION_FAILED,
                not_authorized_message(ctx),
            )
        results = alter_credentials(
            self._store,
            [CredentialDeletion(d.name, d.mechanism) for d in request.deletions],
            [
                CredentialUpsertion(
                    u.name,
                    u.mechanism,
                    u.iterations,
                    bytes(u.salt),
                    bytes(u.salted_password),
                )
                for u in request.upsertions
            ],
        )
        for result in results:
            if result.error == Errors.NONE:
                log.info(
                    "SCRAM credentials of user %r altered over the wire", result.user
                )
        return alter_response.AlterUserScramCredentialsResponse(
            results=tuple(
                alter_response.AlterUserScramCredentialsResult(
                    user=r.user, error_code=r.error, error_message=r.message
                )
                for r in results
            )
        )


def _alter_failed(
    request: AlterUserScramCredentialsRequest, error: int, message: str | None
) -> alter_response.AlterUserScramCredentialsResponse:
    """Kafka's ``AlterUserScramCredentialsRequest.getErrorResponse``: every named user once,
    sorted, with the error."""
    users = {d.name for d in request.deletions} | {u.name for u in request.upsertions}
    return alter_response.AlterUserScramCredentialsResponse(
        results=tuple(
            alter_response.AlterUserScramCredentialsResult(
                user=user, error_code=error, error_message=message
            )
            for user in sorted(users)
        )
    )

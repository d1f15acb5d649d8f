"""Kafka's security APIs on the embedded coordinator: SaslHandshake/SaslAuthenticate outside the SASL
exchange, the ACL APIs and the SCRAM credential APIs, with Kafka's codes and messages (decisions in
broker/security/admin.py; a change is answered once it is durable in the coordinator log, and a change
the log refuses, a full disk say, is answered with the log's error and changes nothing)."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.alter_user_scram_credentials.v0 import request as alter_scram_req
from kio.schema.alter_user_scram_credentials.v0 import response as alter_scram_res
from kio.schema.create_acls.v3 import request as create_acls_req
from kio.schema.create_acls.v3 import response as create_acls_res
from kio.schema.delete_acls.v3 import request as delete_acls_req
from kio.schema.delete_acls.v3 import response as delete_acls_res
from kio.schema.describe_acls.v3 import request as describe_acls_req
from kio.schema.describe_acls.v3 import response as describe_acls_res
from kio.schema.describe_client_quotas.v1 import request as describe_quotas_req
from kio.schema.describe_client_quotas.v1 import response as describe_quotas_res
from kio.schema.describe_user_scram_credentials.v0 import request as describe_scram_req
from kio.schema.describe_user_scram_credentials.v0 import response as describe_scram_res
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2 import request as sasl_authenticate_req
from kio.schema.sasl_authenticate.v2 import response as sasl_authenticate_res
from kio.schema.sasl_handshake.v1 import request as sasl_handshake_req
from kio.schema.sasl_handshake.v1 import response as sasl_handshake_res
from kio.static.primitive import i8, i32, i64Timedelta

from staticfleet.broker.registry import NO_THROTTLE, BrokerContext, Request, kafka_api
from staticfleet.broker.security import admin, records
from staticfleet.broker.security.access import Access, Session
from staticfleet.broker.security.acl import AclOperation
from staticfleet.broker.security.authenticator import AFTER_AUTHENTICATION_MESSAGE
from staticfleet.coordinator.errors import StoreError

E = ErrorCode
NO_LIFETIME = i64Timedelta.parse(datetime.timedelta(0))


def access(ctx: BrokerContext, request: Request[Any]) -> Access:
    """The checks of this request: the caller's principal and address, the coordinator's authorizer."""
    authorizer = ctx.security.authorizer if ctx.security is not None else None
    return Access(authorizer, Session.of(request.principal, request.client_host.lstrip("/")))


def _denied(request: Request[Any], permission: str) -> str:
    return admin.denied_message(permission, request.client_host, request.listener, request.listener)


# === SASL outside the exchange (PLAINTEXT and SSL listeners, or an authenticated connection) ===============


@kafka_api("sasl_handshake", (0, 1))
async def handle_sasl_handshake(
    ctx: BrokerContext, request: Request[sasl_handshake_req.SaslHandshakeRequest]
) -> sasl_handshake_res.SaslHandshakeResponse:
    return sasl_handshake_res.SaslHandshakeResponse(error_code=E.illegal_sasl_state, mechanisms=())


@kafka_api("sasl_authenticate", (0, 2))
async def handle_sasl_authenticate(
    ctx: BrokerContext, request: Request[sasl_authenticate_req.SaslAuthenticateRequest]
) -> sasl_authenticate_res.SaslAuthenticateResponse:
    return sasl_authenticate_res.SaslAuthenticateResponse(
        error_code=E.illegal_sasl_state,
        error_message=AFTER_AUTHENTICATION_MESSAGE,
        auth_bytes=b"",
        session_lifetime=NO_LIFETIME,
    )


# === ACLs =================================================================================================


def _codes(f: Any) -> admin.AclCodes:
    return admin.AclCodes(
        int(f.resource_type_filter),
        f.resource_name_filter,
        int(f.pattern_type_filter),
        f.principal_filter,
        f.host_filter,
        int(f.operation),
        int(f.permission_type),
    )


@kafka_api("describe_acls", (1, 3))
async def handle_describe_acls(
    ctx: BrokerContext, request: Request[describe_acls_req.DescribeAclsRequest]
) -> describe_acls_res.DescribeAclsResponse:
    def answer(
        code: ErrorCode, message: str | None, resources: tuple[Any, ...] = ()
    ) -> describe_acls_res.DescribeAclsResponse:
        return describe_acls_res.DescribeAclsResponse(
            throttle_time=NO_THROTTLE, error_code=code, error_message=message, resources=resources
        )

    if ctx.security is None or ctx.security.authorizer is None:
        result = admin.no_authorizer(describe=True)
        return answer(E(result.error_code), result.error_message)
    if not access(ctx, request).cluster(AclOperation.DESCRIBE):
        return answer(E.cluster_authorization_failed, _denied(request, "DESCRIBE"))
    grouped = admin.describe_acls(ctx.security.authorizer, _codes(request.body))
    return answer(
        E.none,
        "",
        tuple(
            describe_acls_res.DescribeAclsResource(
                resource_type=i8(int(pattern.resource_type)),
                resource_name=pattern.name,
                pattern_type=i8(int(pattern.pattern_type)),
                acls=tuple(
                    describe_acls_res.AclDescription(
                        principal=e.principal,
                        host=e.host,
                        operation=i8(int(e.operation)),
                        permission_type=i8(int(e.permission)),
                    )
                    for e in entries
                ),
            )
            for pattern, entries in grouped
        ),
    )


@kafka_api("create_acls", (1, 3))
async def handle_create_acls(
    ctx: BrokerContext, request: Request[create_acls_req.CreateAclsRequest]
) -> create_acls_res.CreateAclsResponse:
    creations = request.body.creations

    def answer(results: list[admin.Result]) -> create_acls_res.CreateAclsResponse:
        return create_acls_res.CreateAclsResponse(
            throttle_time=NO_THROTTLE,
            results=tuple(
                create_acls_res.AclCreationResult(error_code=E(r.error_code), error_message=r.error_message)
                for r in results
            ),
        )

    if ctx.security is None or ctx.security.authorizer is None:
        return answer([admin.no_authorizer(describe=False)] * len(creations))
    if not access(ctx, request).cluster(AclOperation.ALTER):
        denied = admin.Result(admin.CLUSTER_AUTHORIZATION_FAILED, _denied(request, "ALTER"))
        return answer([denied] * len(creations))
    codes = [
        admin.AclCodes(
            int(c.resource_type),
            c.resource_name,
            int(c.resource_pattern_type),
            c.principal,
            c.host,
            int(c.operation),
            int(c.permission_type),
        )
        for c in creations
    ]
    results, to_add = admin.plan_create_acls(codes)
    try:
        await ctx.security.change(ctx.host, (records.AclRecord(b) for b in dict.fromkeys(to_add)))
    except StoreError as exc:
        return answer([admin.Result(int(exc.code), str(exc))] * len(creations))
    return answer(results)


@kafka_api("delete_acls", (1, 3))
async def handle_delete_acls(
    ctx: BrokerContext, request: Request[delete_acls_req.DeleteAclsRequest]
) -> delete_acls_res.DeleteAclsResponse:
    filters = request.body.filters

    def answer(results: list[admin.FilterResult]) -> delete_acls_res.DeleteAclsResponse:
        return delete_acls_res.DeleteAclsResponse(
            throttle_time=NO_THROTTLE,
            filter_results=tuple(
                delete_acls_res.DeleteAclsFilterResult(
                    error_code=E(r.error_code),
                    error_message=r.error_message,
                    matching_acls=tuple(
                        delete_acls_res.DeleteAclsMatchingAcl(
                            error_code=E.none,
                            error_message=None,
                            resource_type=i8(int(b.pattern.resource_type)),
                            resource_name=b.pattern.name,
                            pattern_type=i8(int(b.pattern.pattern_type)),
                            principal=b.entry.principal,
                            host=b.entry.host,
                            operation=i8(int(b.entry.operation)),
                            permission_type=i8(int(b.entry.permission)),
                        )
                        for b in r.matching
                    ),
                )
                for r in results
            ),
        )

    if ctx.security is None or ctx.security.authorizer is None:
        result = admin.no_authorizer(describe=False)
        return answer([admin.FilterResult(result.error_code, result.error_message, ())] * len(filters))
    if not access(ctx, request).cluster(AclOperation.ALTER):
        denied = admin.FilterResult(admin.CLUSTER_AUTHORIZATION_FAILED, _denied(request, "ALTER"), ())
        return answer([denied] * len(filters))
    results, to_remove = admin.plan_delete_acls(ctx.security.authorizer, [_codes(f) for f in filters])
    try:
        await ctx.security.change(ctx.host, (records.AclTombstone(b) for b in to_remove))
    except StoreError as exc:
        return answer([admin.FilterResult(int(exc.code), str(exc), ())] * len(filters))
    return answer(results)


# === SCRAM credentials ====================================================================================


@kafka_api("describe_user_scram_credentials", (0, 0))
async def handle_describe_user_scram_credentials(
    ctx: BrokerContext, request: Request[describe_scram_req.DescribeUserScramCredentialsRequest]
) -> describe_scram_res.DescribeUserScramCredentialsResponse:
    users = None if request.body.users is None else [u.name for u in request.body.users]
    if not access(ctx, request).cluster(AclOperation.DESCRIBE):
        code, message, results = E.cluster_authorization_failed, None, admin.describe_scram_denied(users)
    else:
        assert ctx.security is not None
        code, message, results = E.none, "", admin.describe_scram(ctx.security.credentials, users)
    return describe_scram_res.DescribeUserScramCredentialsResponse(
        throttle_time=NO_THROTTLE,
        error_code=code,
        error_message=message,
        results=tuple(
            describe_scram_res.DescribeUserScramCredentialsResult(
                user=r.user,
                error_code=E(r.error_code),
                error_message=r.error_message,
                credential_infos=tuple(
                    describe_scram_res.CredentialInfo(mechanism=i8(m), iterations=i32(i))
                    for m, i in r.credentials
                ),
            )
            for r in results
        ),
    )


@kafka_api("alter_user_scram_credentials", (0, 0))
async def handle_alter_user_scram_credentials(
    ctx: BrokerContext, request: Request[alter_scram_req.AlterUserScramCredentialsRequest]
) -> alter_scram_res.AlterUserScramCredentialsResponse:
    deletions = [(d.name, int(d.mechanism)) for d in request.body.deletions]
    upsertions = [
        admin.Upsertion(u.name, int(u.mechanism), int(u.iterations), bytes(u.salt), bytes(u.salted_password))
        for u in request.body.upsertions
    ]
    if not access(ctx, request).cluster(AclOperation.ALTER) or ctx.security is None:
        results = admin.alter_scram_denied(deletions, upsertions, _denied(request, "ALTER"))
    else:
        results, changes = admin.plan_alter_scram(ctx.security.credentials, deletions, upsertions)
        try:
            await ctx.security.change(
                ctx.host,
                [records.ScramCredentialTombstone(name, mechanism) for name, mechanism in changes.deletions]
                + [records.ScramCredentialRecord(n, m, c) for n, m, c in changes.upsertions],
            )
        except StoreError as exc:
            results = [admin.UserResult(r.user, int(exc.code), str(exc)) for r in results]
    return alter_scram_res.AlterUserScramCredentialsResponse(
        throttle_time=NO_THROTTLE,
        results=tuple(
            alter_scram_res.AlterUserScramCredentialsResult(
                user=r.user, error_code=E(r.error_code), error_message=r.error_message
            )
            for r in results
        ),
    )


# === client quotas (none are enforced; kafka-configs asks for them when it describes users) ===============


@kafka_api("describe_client_quotas", (0, 1))
async def handle_describe_client_quotas(
    ctx: BrokerContext, request: Request[describe_quotas_req.DescribeClientQuotasRequest]
) -> describe_quotas_res.DescribeClientQuotasResponse:
    if not access(ctx, request).cluster(AclOperation.DESCRIBE_CONFIGS):
        return describe_quotas_res.DescribeClientQuotasResponse(
            throttle_time=NO_THROTTLE,
            error_code=E.cluster_authorization_failed,
            error_message="Cluster authorization failed.",
            entries=None,
        )
    return describe_quotas_res.DescribeClientQuotasResponse(
        throttle_time=NO_THROTTLE, error_code=E.none, error_message=None, entries=()
    )

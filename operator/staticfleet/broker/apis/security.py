"""Kafka's security APIs on the embedded coordinator: SaslHandshake and SaslAuthenticate (the login,
whose state is the connection's, see security/authenticator.py), the ACL APIs and the SCRAM credential
APIs, with Kafka's codes and messages (decisions in broker/security/admin.py; a change is answered once
it is durable in the coordinator log, and a change the log refuses, a full disk say, is answered with
the log's error and changes nothing)."""

from __future__ import annotations

import datetime

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
from kio.static.protocol import ResponsePayload

from staticfleet.broker.registry import (
    NO_THROTTLE,
    ApiError,
    BrokerContext,
    CloseConnection,
    Request,
    Requires,
    kafka_api,
    needs_permission,
    no_message,
)
from staticfleet.broker.security import admin, records
from staticfleet.broker.security.acl import AclOperation, ResourceType
from staticfleet.broker.security.authenticator import (
    AUTHENTICATE_AFTER_LOGIN,
    HANDSHAKE_AFTER_LOGIN,
    Close,
    LoginStep,
)
from staticfleet.coordinator.errors import StoreError

E = ErrorCode
NO_LIFETIME = i64Timedelta.parse(datetime.timedelta(0))


SaslHandshakeRequest = sasl_handshake_req.SaslHandshakeRequest
SaslAuthenticateRequest = sasl_authenticate_req.SaslAuthenticateRequest
DescribeAclsRequest = describe_acls_req.DescribeAclsRequest
CreateAclsRequest = create_acls_req.CreateAclsRequest
DeleteAclsRequest = delete_acls_req.DeleteAclsRequest
DescribeScramRequest = describe_scram_req.DescribeUserScramCredentialsRequest
AlterScramRequest = alter_scram_req.AlterUserScramCredentialsRequest
DescribeQuotasRequest = describe_quotas_req.DescribeClientQuotasRequest


# === the SASL login =======================================================================================


def _sasl_handshake_error(request: Request[SaslHandshakeRequest], error: ApiError) -> ResponsePayload:
    return sasl_handshake_res.SaslHandshakeResponse(error_code=error.code, mechanisms=())


@kafka_api(
    "sasl_handshake", (0, 1), SaslHandshakeRequest, error=_sasl_handshake_error, login=LoginStep.HANDSHAKE
)
async def handle_sasl_handshake(
    ctx: BrokerContext, request: Request[SaslHandshakeRequest]
) -> sasl_handshake_res.SaslHandshakeResponse:
    """The mechanisms enabled, and the one chosen; ILLEGAL_SASL_STATE where there is nothing (more) to log
    in to. v0 makes the frames that follow bare SASL tokens."""
    login = request.peer.login
    answer = (
        HANDSHAKE_AFTER_LOGIN if login is None else login.handshake(request.version, request.body.mechanism)
    )
    return sasl_handshake_res.SaslHandshakeResponse(
        error_code=E(answer.error_code), mechanisms=answer.mechanisms
    )


def _sasl_authenticate_error(request: Request[SaslAuthenticateRequest], error: ApiError) -> ResponsePayload:
    return sasl_authenticate_res.SaslAuthenticateResponse(
        error_code=error.code, error_message=error.message, auth_bytes=b"", session_lifetime=NO_LIFETIME
    )


@kafka_api(
    "sasl_authenticate",
    (0, 2),
    SaslAuthenticateRequest,
    error=_sasl_authenticate_error,
    login=LoginStep.AUTHENTICATE,
)
async def handle_sasl_authenticate(
    ctx: BrokerContext, request: Request[SaslAuthenticateRequest]
) -> sasl_authenticate_res.SaslAuthenticateResponse:
    """One round of the SASL exchange; its failure ends the connection (after its answer, or at once
    where Kafka sends none)."""
    login = request.peer.login
    answer = (
        AUTHENTICATE_AFTER_LOGIN
        if login is None
        else login.authenticate(request.version, bytes(request.body.auth_bytes))
    )
    if answer.close == Close.NOW:
        raise CloseConnection("the SASL token could not be evaluated", "authentication")
    return sasl_authenticate_res.SaslAuthenticateResponse(
        error_code=E(answer.error_code),
        error_message=answer.error_message,
        auth_bytes=answer.auth_bytes,
        session_lifetime=i64Timedelta.parse(datetime.timedelta(milliseconds=answer.session_lifetime_ms)),
    )


# === ACLs =================================================================================================


def _codes(f: describe_acls_req.DescribeAclsRequest | delete_acls_req.DeleteAclsFilter) -> admin.AclCodes:
    return admin.AclCodes(
        int(f.resource_type_filter),
        f.resource_name_filter,
        int(f.pattern_type_filter),
        f.principal_filter,
        f.host_filter,
        int(f.operation),
        int(f.permission_type),
    )


def _describe_acls_answer(
    code: ErrorCode, message: str | None, resources: tuple[describe_acls_res.DescribeAclsResource, ...] = ()
) -> describe_acls_res.DescribeAclsResponse:
    return describe_acls_res.DescribeAclsResponse(
        throttle_time=NO_THROTTLE, error_code=code, error_message=message, resources=resources
    )


def _describe_acls_error(request: Request[DescribeAclsRequest], error: ApiError) -> ResponsePayload:
    return _describe_acls_answer(error.code, error.message)


@kafka_api(
    "describe_acls",
    (1, 3),
    DescribeAclsRequest,
    error=_describe_acls_error,
    acl=(Requires.cluster(AclOperation.DESCRIBE, message=needs_permission),),
)
async def handle_describe_acls(
    ctx: BrokerContext, request: Request[DescribeAclsRequest]
) -> describe_acls_res.DescribeAclsResponse:
    answer = _describe_acls_answer
    if ctx.security is None or ctx.security.authorizer is None:
        result = admin.no_authorizer(describe=True)
        return answer(E(result.error_code), result.error_message)
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


def _create_acls_answer(results: list[admin.Result]) -> create_acls_res.CreateAclsResponse:
    return create_acls_res.CreateAclsResponse(
        throttle_time=NO_THROTTLE,
        results=tuple(
            create_acls_res.AclCreationResult(error_code=E(r.error_code), error_message=r.error_message)
            for r in results
        ),
    )


def _create_acls_error(request: Request[CreateAclsRequest], error: ApiError) -> ResponsePayload:
    return _create_acls_answer([admin.Result(int(error.code), error.message)] * len(request.body.creations))


@kafka_api(
    "create_acls",
    (1, 3),
    CreateAclsRequest,
    error=_create_acls_error,
    acl=(Requires.cluster(AclOperation.ALTER, message=needs_permission),),
)
async def handle_create_acls(
    ctx: BrokerContext, request: Request[CreateAclsRequest]
) -> create_acls_res.CreateAclsResponse:
    creations = request.body.creations
    answer = _create_acls_answer
    if ctx.security is None or ctx.security.authorizer is None:
        return answer([admin.no_authorizer(describe=False)] * len(creations))
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


def _delete_acls_answer(results: list[admin.FilterResult]) -> delete_acls_res.DeleteAclsResponse:
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


def _delete_acls_error(request: Request[DeleteAclsRequest], error: ApiError) -> ResponsePayload:
    failed = admin.FilterResult(int(error.code), error.message, ())
    return _delete_acls_answer([failed] * len(request.body.filters))


@kafka_api(
    "delete_acls",
    (1, 3),
    DeleteAclsRequest,
    error=_delete_acls_error,
    acl=(Requires.cluster(AclOperation.ALTER, message=needs_permission),),
)
async def handle_delete_acls(
    ctx: BrokerContext, request: Request[DeleteAclsRequest]
) -> delete_acls_res.DeleteAclsResponse:
    filters = request.body.filters
    answer = _delete_acls_answer
    if ctx.security is None or ctx.security.authorizer is None:
        result = admin.no_authorizer(describe=False)
        return answer([admin.FilterResult(result.error_code, result.error_message, ())] * len(filters))
    results, to_remove = admin.plan_delete_acls(ctx.security.authorizer, [_codes(f) for f in filters])
    try:
        await ctx.security.change(ctx.host, (records.AclTombstone(b) for b in to_remove))
    except StoreError as exc:
        return answer([admin.FilterResult(int(exc.code), str(exc), ())] * len(filters))
    return answer(results)


# === SCRAM credentials ====================================================================================


def _describe_scram_answer(
    code: ErrorCode, message: str | None, results: list[admin.UserResult]
) -> describe_scram_res.DescribeUserScramCredentialsResponse:
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


def _scram_users(request: Request[DescribeScramRequest]) -> list[str] | None:
    return None if request.body.users is None else [u.name for u in request.body.users]


def _describe_scram_error(request: Request[DescribeScramRequest], error: ApiError) -> ResponsePayload:
    # One anonymous entry per user asked for, each with the error.
    failed = [admin.UserResult("", int(error.code), error.message) for _ in _scram_users(request) or ()]
    return _describe_scram_answer(error.code, error.message, failed)


@kafka_api(
    "describe_user_scram_credentials",
    (0, 0),
    DescribeScramRequest,
    error=_describe_scram_error,
    acl=(Requires.cluster(AclOperation.DESCRIBE, message=no_message),),
)
async def handle_describe_user_scram_credentials(
    ctx: BrokerContext, request: Request[DescribeScramRequest]
) -> describe_scram_res.DescribeUserScramCredentialsResponse:
    assert ctx.security is not None
    return _describe_scram_answer(
        E.none, "", admin.describe_scram(ctx.security.credentials, _scram_users(request))
    )


def _scram_changes(
    request: Request[AlterScramRequest],
) -> tuple[list[tuple[str, int]], list[admin.Upsertion]]:
    deletions = [(d.name, int(d.mechanism)) for d in request.body.deletions]
    upsertions = [
        admin.Upsertion(u.name, int(u.mechanism), int(u.iterations), bytes(u.salt), bytes(u.salted_password))
        for u in request.body.upsertions
    ]
    return deletions, upsertions


def _alter_scram_answer(results: list[admin.UserResult]) -> alter_scram_res.AlterUserScramCredentialsResponse:
    return alter_scram_res.AlterUserScramCredentialsResponse(
        throttle_time=NO_THROTTLE,
        results=tuple(
            alter_scram_res.AlterUserScramCredentialsResult(
                user=r.user, error_code=E(r.error_code), error_message=r.error_message
            )
            for r in results
        ),
    )


def _alter_scram_error(request: Request[AlterScramRequest], error: ApiError) -> ResponsePayload:
    # Every distinct user named, sorted, with the error (Kafka's getErrorResponse).
    deletions, upsertions = _scram_changes(request)
    users = sorted({name for name, _ in deletions} | {u.name for u in upsertions})
    return _alter_scram_answer([admin.UserResult(user, int(error.code), error.message) for user in users])


@kafka_api(
    "alter_user_scram_credentials",
    (0, 0),
    AlterScramRequest,
    error=_alter_scram_error,
    acl=(Requires.cluster(AclOperation.ALTER, message=needs_permission),),
)
async def handle_alter_user_scram_credentials(
    ctx: BrokerContext, request: Request[AlterScramRequest]
) -> alter_scram_res.AlterUserScramCredentialsResponse:
    deletions, upsertions = _scram_changes(request)
    if ctx.security is None:
        message = needs_permission(request, AclOperation.ALTER, ResourceType.CLUSTER)
        results = admin.alter_scram_denied(deletions, upsertions, message)
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
    return _alter_scram_answer(results)


# === client quotas (none are enforced; kafka-configs asks for them when it describes users) ===============


def _describe_quotas_error(request: Request[DescribeQuotasRequest], error: ApiError) -> ResponsePayload:
    return describe_quotas_res.DescribeClientQuotasResponse(
        throttle_time=NO_THROTTLE, error_code=error.code, error_message=error.message, entries=None
    )


@kafka_api(
    "describe_client_quotas",
    (0, 1),
    DescribeQuotasRequest,
    error=_describe_quotas_error,
    acl=(Requires.cluster(AclOperation.DESCRIBE_CONFIGS),),
)
async def handle_describe_client_quotas(
    ctx: BrokerContext, request: Request[DescribeQuotasRequest]
) -> describe_quotas_res.DescribeClientQuotasResponse:
    return describe_quotas_res.DescribeClientQuotasResponse(
        throttle_time=NO_THROTTLE, error_code=E.none, error_message=None, entries=()
    )

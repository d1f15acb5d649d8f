"""The ACL and SCRAM admin APIs as decisions (pure): what Kafka answers, and what to change.

Each `plan_*` function returns the answers and the changes to make; the server persists the changes, applies
them, then answers (persist first, answer second). Messages and codes are Kafka 4.3.1's, as the secured
conformance scenarios recorded them (conformance/recorded-kafka.json).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from staticfleet.broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    InvalidAcl,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
    UnconstructibleAcl,
    decode,
    validate_creation,
)
from staticfleet.broker.security.authorizer import Authorizer
from staticfleet.broker.security.scram import (
    MAX_ITERATIONS,
    ScramCredential,
    ScramMechanism,
    credential_from_salted_password,
)
from staticfleet.broker.security.users import CredentialStore

# Kafka's error codes used here, as the integers the answers carry.
NONE = int(ErrorCode.none)
UNKNOWN_SERVER_ERROR = int(ErrorCode.unknown_server_error)
CLUSTER_AUTHORIZATION_FAILED = int(ErrorCode.cluster_authorization_failed)
UNSUPPORTED_SASL_MECHANISM = int(ErrorCode.unsupported_sasl_mechanism)
INVALID_REQUEST = int(ErrorCode.invalid_request)
SECURITY_DISABLED = int(ErrorCode.security_disabled)
RESOURCE_NOT_FOUND = int(ErrorCode.resource_not_found)
DUPLICATE_RESOURCE = int(ErrorCode.duplicate_resource)
UNACCEPTABLE_CREDENTIAL = int(ErrorCode.unacceptable_credential)


class MalformedRequest(ValueError):
    """A request Kafka fails to parse (a code 0 where an ACL value is required): close, no answer."""


@dataclass(frozen=True)
class Result:
    error_code: int
    error_message: str | None


def denied_message(permission: str, connection: str, listener: str, protocol: str) -> str:
    """Kafka's text for a cluster-permission denial, which describes the server's request object."""
    return (
        f"Request Request(processor=0, connectionId={connection}, session=Session(principal), "
        f"listenerName=ListenerName({listener}), securityProtocol={protocol}, buffer=null, envelope=None) "
        f"needs {permission} permission."
    )


def no_authorizer(describe: bool) -> Result:
    text = "No Authorizer is configured on the broker" if describe else "No Authorizer is configured."
    return Result(SECURITY_DISABLED, text)


# --- ACLs


@dataclass(frozen=True)
class AclCodes:
    """One creation or filter as it arrives: Kafka's codes, unchecked."""

    resource_type: int
    name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def _check_parseable(self) -> None:
        if 0 in (self.resource_type, self.pattern_type, self.operation, self.permission):
            raise MalformedRequest("an ACL value of 0 (UNKNOWN) does not parse")

    def binding(self) -> AclBinding:
        self._check_parseable()
        return AclBinding(
            ResourcePattern(
                ResourceType(decode(ResourceType, self.resource_type)),
                self.name or "",
                PatternType(decode(PatternType, self.pattern_type)),
            ),
            AccessControlEntry(
                self.principal or "",
                self.host or "",
                AclOperation(decode(AclOperation, self.operation)),
                PermissionType(decode(PermissionType, self.permission)),
            ),
        )

    def filter(self) -> AclBindingFilter:
        self._check_parseable()
        return AclBindingFilter(
            ResourceType(decode(ResourceType, self.resource_type)),
            self.name,
            PatternType(decode(PatternType, self.pattern_type)),
            self.principal,
            self.host,
            AclOperation(decode(AclOperation, self.operation)),
            PermissionType(decode(PermissionType, self.permission)),
        )


def plan_create_acls(creations: Sequence[AclCodes]) -> tuple[list[Result], list[AclBinding]]:
    """One result per creation, in order, and the bindings to store (duplicates are harmless)."""
    bindings = [creation.binding() for creation in creations]
    results: list[Result] = []
    to_add: list[AclBinding] = []
    for binding in bindings:
        try:
            validate_creation(binding)
        except UnconstructibleAcl:
            # Kafka cannot build the binding at all and fails the whole request.
            return [Result(UNKNOWN_SERVER_ERROR, None) for _ in bindings], []
        except InvalidAcl as exc:
            results.append(Result(INVALID_REQUEST, str(exc)))
            continue
        results.append(Result(NONE, ""))
        to_add.append(binding)
    return results, to_add


def describe_acls(
    authorizer: Authorizer, codes: AclCodes
) -> list[tuple[ResourcePattern, list[AccessControlEntry]]]:
    """The matching ACLs grouped by resource pattern."""
    acl_filter = codes.filter()
    if acl_filter.unknown_part() is not None:
        return []
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in authorizer.bindings(acl_filter):
        grouped.setdefault(binding.pattern, []).append(binding.entry)
    return list(grouped.items())


@dataclass(frozen=True)
class FilterResult:
    error_code: int
    error_message: str | None
    matching: tuple[AclBinding, ...]


def plan_delete_acls(
    authorizer: Authorizer, filters: Sequence[AclCodes]
) -> tuple[list[FilterResult], list[AclBinding]]:
    """One result per filter with the ACLs it matched, and every binding to remove."""
    parsed = [codes.filter() for codes in filters]
    results: list[FilterResult] = []
    to_remove: dict[AclBinding, None] = {}
    for acl_filter in parsed:
        unknown = acl_filter.unknown_part()
        if unknown is not None:
            results.append(FilterResult(INVALID_REQUEST, unknown, ()))
            continue
        matching = tuple(authorizer.bindings(acl_filter))
        to_remove.update(dict.fromkeys(matching))
        results.append(FilterResult(NONE, None, matching))
    return results, list(to_remove)


# --- SCRAM credentials


@dataclass(frozen=True)
class UserResult:
    user: str
    error_code: int
    error_message: str | None
    credentials: tuple[tuple[int, int], ...] = ()  # (mechanism type, iterations)


def describe_scram(store: CredentialStore, users: Sequence[str] | None) -> list[UserResult]:
    """DescribeUserScramCredentials (Kafka's ScramImage.describe): every user when none are named."""
    if not users:
        names: dict[str, bool] = dict.fromkeys(store.scram_users(), False)
    else:
        names = {}
        for user in users:
            names[user] = user in names
    results = []
    for user, duplicate in names.items():
        if duplicate:
            message = f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
            results.append(UserResult(user, DUPLICATE_RESOURCE, message))
            continue
        found = tuple((m.type_code, iterations) for m, iterations in store.describe(user))
        if found:
            results.append(UserResult(user, NONE, "", found))
        else:
            message = f"Attempt to describe a user credential that does not exist: {user}"
            results.append(UserResult(user, RESOURCE_NOT_FOUND, message))
    return results


@dataclass(frozen=True)
class Upsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True)
class ScramChanges:
    deletions: tuple[tuple[str, ScramMechanism], ...]
    upsertions: tuple[tuple[str, ScramMechanism, ScramCredential], ...]


_TWICE = "A user credential cannot be altered twice in the same request"


def _check_name_and_mechanism(name: str, code: int) -> Result | None:
    if not name:
        return Result(UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    if ScramMechanism.by_type(code) is None:
        return Result(UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    return None


def plan_alter_scram(
    store: CredentialStore, deletions: Sequence[tuple[str, int]], upsertions: Sequence[Upsertion]
) -> tuple[list[UserResult], ScramChanges]:
    """AlterUserScramCredentials (Kafka's ScramControlManager.alterCredentials): a user may appear once;
    results list the deletions, then the upsertions, then the errors."""
    to_delete: dict[str, tuple[str, int]] = {}
    to_upsert: dict[str, Upsertion] = {}
    errors: dict[str, Result] = {}
    for name, code in deletions:
        if name in errors:
            continue
        if to_delete.pop(name, None) is not None:
            errors[name] = Result(DUPLICATE_RESOURCE, _TWICE)
            continue
        error = _check_name_and_mechanism(name, code)
        mechanism = ScramMechanism.by_type(code)
        if error is None and mechanism is not None and store.scram(name, mechanism) is None:
            error = Result(RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
        if error is not None:
            errors[name] = error
        else:
            to_delete[name] = (name, code)
    for upsertion in upsertions:
        name = upsertion.name
        if name in errors:
            continue
        if to_delete.pop(name, None) is not None or to_upsert.pop(name, None) is not None:
            errors[name] = Result(DUPLICATE_RESOURCE, _TWICE)
            continue
        error = _check_name_and_mechanism(name, upsertion.mechanism)
        if error is None and upsertion.iterations < ScramMechanism.SCRAM_SHA_256.min_iterations:
            error = Result(UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        elif error is None and upsertion.iterations > MAX_ITERATIONS:
            error = Result(UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        if error is not None:
            errors[name] = error
        else:
            to_upsert[name] = upsertion
    results = [UserResult(name, NONE, None) for name in to_delete]
    results += [UserResult(name, NONE, None) for name in to_upsert]
    results += [UserResult(name, e.error_code, e.error_message) for name, e in errors.items()]
    changes = ScramChanges(
        tuple((name, _mechanism(code)) for name, code in to_delete.values()),
        tuple(
            (
                u.name,
                _mechanism(u.mechanism),
                credential_from_salted_password(
                    _mechanism(u.mechanism), u.salt, u.salted_password, u.iterations
                ),
            )
            for u in to_upsert.values()
        ),
    )
    return results, changes


def alter_scram_denied(
    deletions: Iterable[tuple[str, int]], upsertions: Iterable[Upsertion], message: str
) -> list[UserResult]:
    """Without ALTER on the cluster: every distinct user, sorted, is denied."""
    users = sorted({name for name, _ in deletions} | {u.name for u in upsertions})
    return [UserResult(user, CLUSTER_AUTHORIZATION_FAILED, message) for user in users]


def _mechanism(code: int) -> ScramMechanism:
    mechanism = ScramMechanism.by_type(code)
    assert mechanism is not None
    return mechanism


def apply_scram(store: CredentialStore, changes: ScramChanges) -> None:
    for name, mechanism in changes.deletions:
        store.delete(name, mechanism)
    for name, mechanism, credential in changes.upsertions:
        store.upsert(name, mechanism, credential)

"""ACL and SCRAM admin API decisions, each checked against the answer Kafka 4.3.1 gave in the secured
conformance scenarios."""

from __future__ import annotations

import pytest

from staticfleet.broker.security.acl import AclBinding, PermissionType
from staticfleet.broker.security.admin import (
    CLUSTER_AUTHORIZATION_FAILED,
    DUPLICATE_RESOURCE,
    INVALID_REQUEST,
    NONE,
    RESOURCE_NOT_FOUND,
    UNACCEPTABLE_CREDENTIAL,
    UNKNOWN_SERVER_ERROR,
    UNSUPPORTED_SASL_MECHANISM,
    AclCodes,
    MalformedRequest,
    Result,
    UserResult,
    alter_scram_denied,
    apply_scram,
    describe_acls,
    describe_scram,
    plan_alter_scram,
    plan_create_acls,
    plan_delete_acls,
)
from staticfleet.broker.security.authorizer import Authorizer, AuthorizerConfig
from staticfleet.broker.security.scram import ScramMechanism, generate_credential, salted_password
from staticfleet.broker.security.users import CredentialStore

GROUP, TOPIC, CLUSTER = 3, 2, 4
LITERAL, PREFIXED, MATCH, ANY = 3, 4, 2, 1
READ, ALL, DESCRIBE, ANY_OP = 3, 2, 8, 1
ALLOW, DENY, ANY_PERMISSION = 3, 2, 1


def codes(
    name: str | None, *, pattern: int = LITERAL, principal: str | None = "User:bob", **kw: int
) -> AclCodes:
    return AclCodes(
        kw.get("resource", GROUP),
        name,
        pattern,
        principal,
        "*" if principal is not None else None,
        kw.get("operation", READ),
        kw.get("permission", ALLOW),
    )


def stored(*creations: AclCodes) -> Authorizer:
    _, bindings = plan_create_acls(creations)
    return Authorizer(AuthorizerConfig(), bindings)


def test_valid_creations_answer_none_with_an_empty_message() -> None:
    results, to_add = plan_create_acls([codes("g"), codes("g", pattern=PREFIXED)])
    assert results == [Result(NONE, ""), Result(NONE, "")] and len(to_add) == 2


@pytest.mark.parametrize(
    ("creation", "message"),
    [
        (codes("foo", resource=CLUSTER), "The only valid name for the CLUSTER resource is kafka-cluster"),
        (codes(""), "Invalid empty resource name"),
        (codes("g", principal="bob"), "Could not parse principal from `bob`"),
        (codes("g", operation=99), "Invalid operation UNKNOWN"),
        (codes("g", permission=9), "Invalid permissionType UNKNOWN"),
        (codes("g", resource=42), "Invalid resourceType UNKNOWN"),
    ],
)
def test_an_invalid_creation_fails_alone_with_invalid_request(creation: AclCodes, message: str) -> None:
    results, to_add = plan_create_acls([codes("g"), creation])
    assert results[0] == Result(NONE, "")
    assert results[1].error_code == INVALID_REQUEST and (results[1].error_message or "").startswith(message)
    assert len(to_add) == 1


def test_a_filter_only_value_in_a_creation_fails_every_result_with_unknown_server_error() -> None:
    results, to_add = plan_create_acls([codes("g"), codes("g", pattern=MATCH)])
    assert results == [Result(UNKNOWN_SERVER_ERROR, None)] * 2 and to_add == []


def test_a_zero_code_does_not_parse() -> None:
    with pytest.raises(MalformedRequest):
        plan_create_acls([codes("g", operation=0)])


def test_a_duplicate_creation_is_stored_once() -> None:
    assert len(stored(codes("g"), codes("g"))) == 1


def test_describe_groups_matching_acls_by_pattern() -> None:
    authorizer = stored(codes("g"), codes("g", principal="User:alice"), codes("g", pattern=PREFIXED))
    grouped = describe_acls(
        authorizer, codes("g", pattern=ANY, principal=None, operation=ANY_OP, permission=ANY_PERMISSION)
    )
    assert [(pattern.pattern_type, len(entries)) for pattern, entries in grouped] == [
        (LITERAL, 2),
        (PREFIXED, 1),
    ]


def test_describe_with_an_unknown_filter_value_matches_nothing() -> None:
    authorizer = stored(codes("g"))
    assert describe_acls(authorizer, codes("g", operation=77)) == []


def test_delete_with_match_removes_literal_and_prefixed_acls_that_apply_and_reports_each() -> None:
    authorizer = stored(
        codes("g"), codes("g-east"), codes("g", pattern=PREFIXED, permission=DENY), codes("other")
    )
    results, to_remove = plan_delete_acls(
        authorizer,
        [
            codes("g-east", pattern=MATCH, principal=None, operation=ANY_OP, permission=ANY_PERMISSION),
            codes("nothing", principal=None, operation=ANY_OP, permission=ANY_PERMISSION),
        ],
    )
    assert [r.error_code for r in results] == [NONE, NONE]
    assert {(b.pattern.name, b.pattern.pattern_type) for b in results[0].matching} == {
        ("g", 4),
        ("g-east", 3),
    }
    assert results[0].error_message is None and results[1].matching == ()
    assert {b.entry.permission for b in to_remove} == {PermissionType.ALLOW, PermissionType.DENY}


def test_delete_with_an_unknown_filter_value_is_invalid_request() -> None:
    results, _ = plan_delete_acls(stored(codes("g")), [codes("g", pattern=99)])
    assert (results[0].error_code, results[0].error_message) == (INVALID_REQUEST, "Unknown patternFilter.")


def _binding_names(bindings: list[AclBinding]) -> list[str]:
    return [b.pattern.name for b in bindings]


# --- SCRAM

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


def store() -> CredentialStore:
    credentials = CredentialStore()
    credentials.upsert("alice", SHA512, generate_credential(SHA512, "x"))
    credentials.upsert("alice", SHA256, generate_credential(SHA256, "x", 8192))
    return credentials


def upsertion(name: str, mechanism: int = 2, iterations: int = 4096) -> object:
    from staticfleet.broker.security.admin import Upsertion

    return Upsertion(name, mechanism, iterations, b"salt", salted_password(SHA512, "pw", b"salt", 4096))


def test_describe_shows_mechanisms_and_iterations() -> None:
    assert describe_scram(store(), ["alice"]) == [UserResult("alice", NONE, "", ((2, 4096), (1, 8192))[::-1])]


def test_describe_of_a_user_without_credentials_is_resource_not_found() -> None:
    (result,) = describe_scram(store(), ["zed"])
    assert (result.error_code, result.error_message) == (
        RESOURCE_NOT_FOUND,
        "Attempt to describe a user credential that does not exist: zed",
    )


def test_describe_of_the_same_user_twice_is_one_duplicate_result() -> None:
    (result,) = describe_scram(store(), ["alice", "alice"])
    assert result.error_code == DUPLICATE_RESOURCE
    assert (
        result.error_message
        == "Cannot describe SCRAM credentials for the same user twice in a single request: alice"
    )


def test_describe_without_users_lists_every_user() -> None:
    assert [r.user for r in describe_scram(store(), None)] == ["alice"]


def test_upsert_then_delete_changes_the_store() -> None:
    credentials = store()
    results, changes = plan_alter_scram(credentials, [("alice", 1)], [upsertion("zed")])  # type: ignore[list-item]
    assert results == [UserResult("alice", NONE, None), UserResult("zed", NONE, None)]
    apply_scram(credentials, changes)
    assert credentials.scram("alice", SHA256) is None and credentials.scram("zed", SHA512) is not None


@pytest.mark.parametrize(
    ("deletions", "upserts", "code", "message"),
    [
        ([], [upsertion("zed", iterations=4095)], UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        ([], [upsertion("zed", iterations=16385)], UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        (
            [("alice", 1)],
            [upsertion("alice")],
            DUPLICATE_RESOURCE,
            "A user credential cannot be altered twice in the same request",
        ),
        ([], [upsertion("")], UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        ([], [upsertion("zed", mechanism=0)], UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        ([("zed", 3)], [], UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        ([("zed", 2)], [], RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
    ],
)
def test_alter_errors_as_kafka_answers_them(
    deletions: list[tuple[str, int]], upserts: list[object], code: int, message: str
) -> None:
    results, changes = plan_alter_scram(store(), deletions, upserts)  # type: ignore[arg-type]
    assert [(r.error_code, r.error_message) for r in results] == [(code, message)]
    assert changes.deletions == () and changes.upsertions == ()


def test_a_user_twice_is_a_duplicate_even_when_the_first_entry_was_valid() -> None:
    results, changes = plan_alter_scram(store(), [("alice", 1), ("alice", 2)], [])
    assert [r.error_code for r in results] == [DUPLICATE_RESOURCE] and changes.deletions == ()


def test_alter_denied_lists_every_distinct_user_sorted() -> None:
    results = alter_scram_denied([("carol", 1)], [upsertion("bob"), upsertion("carol")], "m")  # type: ignore[list-item]
    assert [r.user for r in results] == ["bob", "carol"]
    assert {r.error_code for r in results} == {CLUSTER_AUTHORIZATION_FAILED}

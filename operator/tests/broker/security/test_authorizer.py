"""StandardAuthorizer's rules, one test per rule (KIP-801; StandardAuthorizerData.findAclRule/findResult)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from staticfleet.broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)
from staticfleet.broker.security.authorizer import Authorizer, AuthorizerConfig, parse_super_users

ALICE = "User:alice"
BOB = "User:bob"
HOST = "127.0.0.1"
Op = AclOperation
GROUP = ResourceType.GROUP
TOPIC = ResourceType.TOPIC


def acl(
    name: str,
    operation: AclOperation,
    *,
    principal: str = ALICE,
    allow: bool = True,
    pattern: PatternType = PatternType.LITERAL,
    resource: ResourceType = GROUP,
    host: str = "*",
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource, name, pattern),
        AccessControlEntry(
            principal, host, operation, PermissionType.ALLOW if allow else PermissionType.DENY
        ),
    )


def authorizer(*bindings: AclBinding, **config: object) -> Authorizer:
    return Authorizer(AuthorizerConfig(**config), bindings)  # type: ignore[arg-type]


def test_no_acl_denies_by_default() -> None:
    assert not authorizer().authorize(ALICE, HOST, Op.READ, GROUP, "g")


def test_no_acl_allows_when_allow_everyone_if_no_acl_found() -> None:
    assert authorizer(allow_everyone_if_no_acl_found=True).authorize(ALICE, HOST, Op.READ, GROUP, "g")


def test_allow_everyone_does_not_apply_once_the_resource_has_any_acl_even_for_someone_else() -> None:
    auth = authorizer(acl("g", Op.READ, principal=BOB), allow_everyone_if_no_acl_found=True)
    assert not auth.authorize(ALICE, HOST, Op.READ, GROUP, "g")
    assert auth.authorize(ALICE, HOST, Op.READ, GROUP, "other")


def test_literal_allow_grants_only_that_name() -> None:
    auth = authorizer(acl("g", Op.READ))
    assert auth.authorize(ALICE, HOST, Op.READ, GROUP, "g")
    assert not auth.authorize(ALICE, HOST, Op.READ, GROUP, "g2")


def test_literal_acl_does_not_cover_longer_names() -> None:
    assert not authorizer(acl("fleet", Op.READ)).authorize(ALICE, HOST, Op.READ, GROUP, "fleet-a")


def test_prefixed_allow_grants_every_name_starting_with_the_prefix() -> None:
    auth = authorizer(acl("fleet-", Op.READ, pattern=PatternType.PREFIXED))
    assert auth.authorize(ALICE, HOST, Op.READ, GROUP, "fleet-a")
    assert auth.authorize(ALICE, HOST, Op.READ, GROUP, "fleet-")
    assert not auth.authorize(ALICE, HOST, Op.READ, GROUP, "fleet")
    assert not auth.authorize(ALICE, HOST, Op.READ, GROUP, "Fleet-a")  # case-sensitive


def test_prefixed_star_covers_only_names_beginning_with_star() -> None:
    auth = authorizer(acl("*", Op.READ, pattern=PatternType.PREFIXED))
    assert auth.authorize(ALICE, HOST, Op.READ, GROUP, "*x")
    assert not auth.authorize(ALICE, HOST, Op.READ, GROUP, "g")


def test_literal_star_is_the_wildcard_resource() -> None:
    assert authorizer(acl("*", Op.READ)).authorize(ALICE, HOST, Op.READ, GROUP, "anything")


def test_acls_of_another_resource_type_do_not_apply() -> None:
    auth = authorizer(acl("g", Op.READ, resource=TOPIC))
    assert not auth.authorize(ALICE, HOST, Op.READ, GROUP, "g")


def test_deny_wins_over_allow_on_the_same_pattern() -> None:
    auth = authorizer(acl("g", Op.READ), acl("g", Op.READ, allow=False))
    assert not auth.authorize(ALICE, HOST, Op.READ, GROUP, "g")


def test_prefixed_deny_wins_over_literal_allow() -> None:
    auth = authorizer(acl("g", Op.READ), acl("g", Op.READ, allow=False, pattern=PatternType.PREFIXED))
    assert not auth.authorize(ALICE, HOST, Op.READ, GROUP, "g")


def test_wildcard_deny_wins_over_literal_allow() -> None:
    auth = authorizer(acl("g", Op.READ), acl("*", Op.READ, allow=False))
    assert not auth.authorize(ALICE, HOST, Op.READ, GROUP, "g")


def test_deny_for_all_principals_wins_over_allow_for_the_caller() -> None:
    auth = authorizer(acl("g", Op.READ), acl("g", Op.READ, allow=False, principal="User:*"))
    assert not auth.authorize(ALICE, HOST, Op.READ, GROUP, "g")


def test_deny_for_another_principal_does_not_apply() -> None:
    auth = authorizer(acl("g", Op.READ), acl("g", Op.READ, allow=False, principal=BOB))
    assert auth.authorize(ALICE, HOST, Op.READ, GROUP, "g")


def test_user_star_is_the_only_principal_wildcard() -> None:
    assert authorizer(acl("g", Op.READ, principal="User:*")).authorize(ALICE, HOST, Op.READ, GROUP, "g")
    assert not authorizer(acl("g", Op.READ, principal="*")).authorize(ALICE, HOST, Op.READ, GROUP, "g")


def test_principals_compare_exactly_and_case_sensitively() -> None:
    assert not authorizer(acl("g", Op.READ, principal="User:Alice")).authorize(
        ALICE, HOST, Op.READ, GROUP, "g"
    )


def test_host_must_equal_the_client_address_or_be_star() -> None:
    auth = authorizer(acl("g", Op.READ, host="10.0.0.1"))
    assert auth.authorize(ALICE, "10.0.0.1", Op.READ, GROUP, "g")
    assert not auth.authorize(ALICE, HOST, Op.READ, GROUP, "g")


def test_ipv4_host_acl_does_not_match_ipv6_loopback() -> None:
    auth = authorizer(acl("g", Op.READ, host="127.0.0.1"))
    assert not auth.authorize(ALICE, "0:0:0:0:0:0:0:1", Op.READ, GROUP, "g")


def test_read_implies_describe() -> None:
    assert authorizer(acl("g", Op.READ)).authorize(ALICE, HOST, Op.DESCRIBE, GROUP, "g")


def test_write_delete_and_alter_imply_describe() -> None:
    for operation in (Op.WRITE, Op.DELETE, Op.ALTER):
        assert authorizer(acl("t", operation, resource=TOPIC)).authorize(ALICE, HOST, Op.DESCRIBE, TOPIC, "t")


def test_describe_does_not_imply_read() -> None:
    assert not authorizer(acl("g", Op.DESCRIBE)).authorize(ALICE, HOST, Op.READ, GROUP, "g")


def test_alter_configs_implies_describe_configs() -> None:
    assert authorizer(acl("g", Op.ALTER_CONFIGS)).authorize(ALICE, HOST, Op.DESCRIBE_CONFIGS, GROUP, "g")


def test_describe_configs_is_not_implied_by_read() -> None:
    assert not authorizer(acl("g", Op.READ)).authorize(ALICE, HOST, Op.DESCRIBE_CONFIGS, GROUP, "g")


def test_all_allows_every_operation() -> None:
    auth = authorizer(acl("g", Op.ALL))
    for operation in (Op.READ, Op.DELETE, Op.DESCRIBE, Op.ALTER_CONFIGS):
        assert auth.authorize(ALICE, HOST, operation, GROUP, "g")


def test_deny_read_does_not_deny_describe_implied_by_another_allow() -> None:
    auth = authorizer(acl("t", Op.WRITE, resource=TOPIC), acl("t", Op.READ, allow=False, resource=TOPIC))
    assert auth.authorize(ALICE, HOST, Op.DESCRIBE, TOPIC, "t")
    assert not auth.authorize(ALICE, HOST, Op.READ, TOPIC, "t")


def test_deny_all_denies_every_operation() -> None:
    auth = authorizer(acl("g", Op.ALL), acl("g", Op.ALL, allow=False))
    assert not auth.authorize(ALICE, HOST, Op.DESCRIBE, GROUP, "g")


def test_allow_of_another_operation_still_makes_the_resource_denied_by_default() -> None:
    auth = authorizer(acl("g", Op.DELETE), allow_everyone_if_no_acl_found=True)
    assert not auth.authorize(ALICE, HOST, Op.READ, GROUP, "g")


def test_super_user_is_allowed_everything_even_against_deny() -> None:
    auth = authorizer(
        acl("g", Op.ALL, allow=False, principal="User:admin"), super_users=frozenset({"User:admin"})
    )
    assert auth.authorize("User:admin", HOST, Op.READ, GROUP, "g")


def test_super_users_parse_as_semicolon_separated_principals() -> None:
    assert parse_super_users("User:admin; User:ANONYMOUS;") == {"User:admin", "User:ANONYMOUS"}


def test_adding_an_existing_acl_keeps_one_copy() -> None:
    auth = authorizer(acl("g", Op.READ))
    assert not auth.add(acl("g", Op.READ))
    assert len(auth) == 1


def test_removing_the_last_acl_restores_the_no_acl_default() -> None:
    auth = authorizer(acl("g", Op.READ, principal=BOB), allow_everyone_if_no_acl_found=True)
    assert auth.remove(acl("g", Op.READ, principal=BOB))
    assert auth.authorize(ALICE, HOST, Op.READ, GROUP, "g")


def test_group_authorized_operations_is_3400_when_everything_is_allowed() -> None:
    assert authorizer(acl("g", Op.ALL)).authorized_operations(ALICE, HOST, GROUP, "g") == 3400


def test_group_authorized_operations_from_read_are_read_and_describe() -> None:
    bits = authorizer(acl("g", Op.READ)).authorized_operations(ALICE, HOST, GROUP, "g")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE)


def test_topic_and_cluster_authorized_operations_when_everything_is_allowed() -> None:
    auth = authorizer(super_users=frozenset({ALICE}))
    assert auth.authorized_operations(ALICE, HOST, TOPIC, "t") == 3576
    assert auth.authorized_operations(ALICE, HOST, ResourceType.CLUSTER, "kafka-cluster") == 8096


# --- the index against the rules, over any sequence of adds and removes ----------------------------------

NAMES = st.sampled_from(["", "*", "g", "g1", "g12", "gx", "h", "orders", "orders.eu", "o"])
BINDINGS = st.builds(
    acl,
    NAMES,
    st.sampled_from([Op.READ, Op.DESCRIBE, Op.ALL, Op.WRITE]),
    principal=st.sampled_from([ALICE, BOB, "User:*"]),
    allow=st.booleans(),
    pattern=st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
    resource=st.sampled_from([GROUP, TOPIC]),
)


def by_the_rules(
    bindings: set[AclBinding], operation: AclOperation, resource: ResourceType, name: str
) -> bool:
    """Rules 2-4 of the module docstring, read literally, for ALICE from HOST (no super users)."""
    candidates = [
        b
        for b in bindings
        if b.pattern.resource_type == resource
        and (
            (b.pattern.pattern_type == PatternType.LITERAL and b.pattern.name in (name, "*"))
            or (
                b.pattern.pattern_type == PatternType.PREFIXED
                and b.pattern.name
                and name.startswith(b.pattern.name)
            )
        )
    ]
    applicable = [
        b
        for b in candidates
        if b.entry.principal in (ALICE, "User:*")
        and (
            b.entry.operation in (operation, Op.ALL)
            or (
                b.entry.permission == PermissionType.ALLOW
                and operation == Op.DESCRIBE
                and b.entry.operation in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER)
            )
        )
    ]
    if any(b.entry.permission == PermissionType.DENY for b in applicable):
        return False
    return bool(applicable)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), BINDINGS, st.integers(0, 19)), max_size=20),
    NAMES,
    st.sampled_from([Op.READ, Op.DESCRIBE, Op.WRITE]),
    st.sampled_from([GROUP, TOPIC]),
)
def test_decisions_follow_the_rules_after_any_adds_and_removes(
    changes: list[tuple[bool, AclBinding, int]], name: str, operation: AclOperation, resource: ResourceType
) -> None:
    auth = authorizer()
    present: list[AclBinding] = []
    for add, binding, which in changes:
        if add:
            auth.add(binding)
            if binding not in present:
                present.append(binding)
        elif present:  # remove one that is there
            assert auth.remove(present.pop(which % len(present)))
    assert set(auth.bindings()) == set(present)
    assert auth.authorize(ALICE, HOST, operation, resource, name) == by_the_rules(
        set(present), operation, resource, name
    )

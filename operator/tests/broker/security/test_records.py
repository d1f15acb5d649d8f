"""Security records: they round-trip, replay idempotently, and a snapshot rebuilds the state."""

from __future__ import annotations

import pytest
from hypothesis import given
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
from staticfleet.broker.security.authorizer import Authorizer, AuthorizerConfig
from staticfleet.broker.security.records import (
    AclRecord,
    AclTombstone,
    ScramCredentialRecord,
    ScramCredentialTombstone,
    SecurityRecord,
    SecurityRecordError,
    decode,
    encode,
    replay,
    snapshot,
)
from staticfleet.broker.security.scram import ScramMechanism, generate_credential
from staticfleet.broker.security.users import CredentialStore

SHA512 = ScramMechanism.SCRAM_SHA_512

bindings = st.builds(
    AclBinding,
    st.builds(
        ResourcePattern,
        st.sampled_from([ResourceType.GROUP, ResourceType.TOPIC, ResourceType.CLUSTER]),
        st.text(min_size=1, max_size=40),
        st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
    ),
    st.builds(
        AccessControlEntry,
        st.text(min_size=1, max_size=30).map(lambda name: f"User:{name}"),
        st.sampled_from(["*", "127.0.0.1", "0:0:0:0:0:0:0:1"]),
        st.sampled_from(list(AclOperation)[2:]),
        st.sampled_from([PermissionType.ALLOW, PermissionType.DENY]),
    ),
)


@given(bindings, st.booleans())
def test_acl_records_round_trip(binding: AclBinding, tombstone: bool) -> None:
    record = AclTombstone(binding) if tombstone else AclRecord(binding)
    assert decode(encode(record)) == record


@given(st.text(min_size=1, max_size=50), st.sampled_from(list(ScramMechanism)), st.booleans())
def test_scram_records_round_trip_without_any_password(
    user: str, mechanism: ScramMechanism, tombstone: bool
) -> None:
    credential = generate_credential(mechanism, "never-written")
    record = (
        ScramCredentialTombstone(user, mechanism)
        if tombstone
        else ScramCredentialRecord(user, mechanism, credential)
    )
    body = encode(record)
    assert decode(body) == record
    assert b"never-written" not in body


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"\x09",
        b"\x01\x03\x03",
        b"\x03\x00\x01a\x07",
        encode(
            AclTombstone(
                AclBinding(
                    ResourcePattern(ResourceType.GROUP, "g", PatternType.LITERAL),
                    AccessControlEntry("User:a", "*", AclOperation.READ, PermissionType.ALLOW),
                )
            )
        )
        + b"x",
    ],
)
def test_bad_bodies_are_refused(body: bytes) -> None:
    with pytest.raises(SecurityRecordError):
        decode(body)


def test_replay_applies_in_order_and_is_idempotent() -> None:
    binding = AclBinding(
        ResourcePattern(ResourceType.GROUP, "g", PatternType.LITERAL),
        AccessControlEntry("User:a", "*", AclOperation.READ, PermissionType.ALLOW),
    )
    credential = generate_credential(SHA512, "pw")
    log: list[SecurityRecord] = [
        AclRecord(binding),
        ScramCredentialRecord("a", SHA512, credential),
        AclRecord(binding),
        AclTombstone(binding),
        ScramCredentialTombstone("a", SHA512),
        ScramCredentialRecord("b", SHA512, credential),
    ]
    authorizer, store = Authorizer(AuthorizerConfig()), CredentialStore()
    replay(log, authorizer, store)
    replay(log, authorizer, store)
    assert (
        len(authorizer) == 0 and store.scram("a", SHA512) is None and store.scram("b", SHA512) == credential
    )


@given(st.lists(bindings, max_size=20))
def test_a_snapshot_rebuilds_the_state(acls: list[AclBinding]) -> None:
    authorizer, store = Authorizer(AuthorizerConfig(), acls), CredentialStore()
    store.upsert("u", SHA512, generate_credential(SHA512, "pw"))
    rebuilt_authorizer, rebuilt_store = Authorizer(AuthorizerConfig()), CredentialStore()
    replay([decode(encode(r)) for r in snapshot(authorizer, store)], rebuilt_authorizer, rebuilt_store)
    assert rebuilt_authorizer.bindings() == authorizer.bindings()
    assert rebuilt_store.scram_credentials() == store.scram_credentials()

"""The Kafka-protocol admin path: find a group's coordinator, describe the group, remove members by
instance id (LeaveGroup v3+), read and change group configs. Works against any cluster: the embedded
coordinator or Apache Kafka.

kafka-python 3.x carries the connection (bootstrap, TLS, SASL, version negotiation); requests whose
answers kafka-python would reshape (DescribeGroups, the config APIs) are sent raw so that error codes
and assignment bytes reach us unchanged.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

# kafka-python's modules are loaded here, as this module is imported, not at their first use: the
# operator's passes run in threads, and two threads importing them for the first time at once (two
# fleets' first passes, or a pass and the dashboard) can meet in kafka-python's circular imports, where
# Python breaks the deadlock by failing one thread's import and leaves the package without that module
# for the life of the process ("module 'kafka' has no attribute 'errors'" on every pass after).
import kafka.admin
import kafka.errors
import kafka.protocol.admin
import kafka.protocol.consumer
from kio.schema.errors import ErrorCode

from staticfleet.admin.connection import KafkaConnection
from staticfleet.admin.errors import (
    AdminError,
    AuthenticationFailed,
    ConfigRejected,
    CoordinatorUnreachable,
    GroupNotFound,
    KafkaErrorResponse,
    error_name,
)
from staticfleet.admin.login_probe import login_refusal
from staticfleet.admin.model import (
    AclBinding,
    GroupDescription,
    MemberDescription,
    MemberRemoval,
    Node,
    PartitionOffsets,
    RemovalReport,
    group_state,
)
from staticfleet.coordinator.consumer_protocol import assignment_partitions
from staticfleet.coordinator.group import GroupState

T = TypeVar("T")

RESOURCE_GROUP = 32
_SET, _DELETE = 0, 1
DEFAULT_TIMEOUT_S = 5.0
# A consumer-protocol subscription (v0) to no topics: what a pending member that never joins advertises.
_EMPTY_SUBSCRIPTION = b"\x00\x00" + b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff"


# Errors that say "ask again, maybe elsewhere": the client is dropped and the call reports the
# coordinator unreachable rather than a refusal.
_COORDINATOR_MOVING = (
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator,
)


def _kafka_error_code(exc: BaseException) -> int | None:
    code = getattr(exc, "errno", None)
    return code if isinstance(code, int) else None


UNKNOWN_GROUP_CONFIG = "Unknown group config name"
"""How Apache Kafka's INVALID_CONFIG begins when the key itself is unknown (GroupConfig.validateNames)."""


class GroupAdmin:
    """One connection to one cluster; safe to share between threads (calls are serialised)."""

    def __init__(self, connection: KafkaConnection, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.connection = connection
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._admin: Any = None
        self._cluster_id: str | None = None
        # Group config keys the cluster refused, with its refusal: a cluster does not learn a key while
        # this connection lasts, so a scale-up on Apache Kafka does not ask again before holding its join
        # phase. Cleared with the connection, as the cluster id is.
        self._refused_keys: dict[str, tuple[int, str]] = {}

    def __enter__(self) -> GroupAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._discard()

    def _discard(self) -> None:
        self._cluster_id = None
        self._refused_keys.clear()
        admin, self._admin = self._admin, None
        if admin is not None:
            with contextlib.suppress(Exception):  # closing a broken client must not hide the original error
                admin.close()

    def _unreachable(self, what: str, exc: BaseException) -> CoordinatorUnreachable:
        return CoordinatorUnreachable(
            f"coordinator at {self.connection.bootstrap_servers} unreachable while {what}: {exc}. "
            "Check the bootstrap servers and that the cluster is up."
        )

    def _call(self, what: str, fn: Callable[[Any], T]) -> T:
        """Runs fn(kafka-python admin client); transport failures drop the client (reconnect next time)."""
        from kafka.admin import KafkaAdminClient

        with self._lock:
            if self._admin is None:
                try:
                    self._admin = KafkaAdminClient(**self.connection.kafka_python_config(self.timeout_s))
                except kafka.errors.KafkaError as exc:
                    refusal = login_refusal(self.connection, self.timeout_s)
                    if refusal is not None:
                        raise AuthenticationFailed(
                            f"{self.connection.bootstrap_servers} refused the SASL login of "
                            f"{self.connection.sasl_username!r} with {self.connection.sasl_mechanism}: "
                            f"{refusal}. Check the mechanism, user name and password."
                        ) from exc
                    raise self._unreachable(what, exc) from exc
            try:
                return fn(self._admin)
            except AdminError:
                raise
            except kafka.errors.KafkaError as exc:
                code = _kafka_error_code(exc)
                self._discard()
                if code is not None and code > 0 and code not in _COORDINATOR_MOVING:
                    raise KafkaErrorResponse(code, f"{what}: {error_name(code)} ({exc})") from exc
                raise self._unreachable(what, exc) from exc

    # -- cluster ----------------------------------------------------------------------------------------

    def cluster_id(self) -> str | None:
        """Kafka's cluster id from Metadata (None from a cluster that reports none). Read once per
        connection: a reconnect reads it again."""
        if self._cluster_id is None:

            def run(admin: Any) -> str | None:
                found = admin.describe_cluster().get("cluster_id")
                return str(found) if found else None

            self._cluster_id = self._call("reading the cluster id", run)
        return self._cluster_id

    # -- coordinator ------------------------------------------------------------------------------------

    @staticmethod
    def _node(admin: Any, node_id: int) -> Node:
        broker = admin._manager.cluster.broker_metadata(node_id)
        if broker is None:
            return Node(node_id, "?", 0)
        host = getattr(broker, "host", "?")
        port = getattr(broker, "port", 0)
        return Node(int(node_id), str(host), int(port))

    def find_coordinator(self, group_id: str) -> Node:
        def run(admin: Any) -> Node:
            node_id = admin._manager.run(admin._find_coordinator_id, group_id)
            return self._node(admin, node_id)

        return self._call(f"finding the coordinator of group {group_id}", run)

    # -- describe -----------------------------------------------------------------------------------------

    def describe_group(self, group_id: str) -> GroupDescription:
        """The group's state and members; GroupNotFound when the coordinator does not know it."""
        from kafka.protocol.admin import DescribeGroupsRequest

        async def describe(admin: Any) -> tuple[int, Any]:
            node_id = await admin._find_coordinator_id(group_id)
            request = DescribeGroupsRequest(groups=[group_id], include_authorized_operations=False)
            return node_id, await admin._manager.send(request, node_id=node_id)

        def run(admin: Any) -> GroupDescription:
            node_id, response = admin._manager.run(describe, admin)
            return _group_description(response.groups[0], self._node(admin, node_id))

        return self._call(f"describing group {group_id}", run)

    def describe_consumer_group(self, group_id: str) -> GroupDescription:
        """A group of Kafka 4's consumer protocol (KIP-848) through ConsumerGroupDescribe (DescribeGroups
        answers Dead for one): its state as the coordinator names it (Assigning, Reconciling, Stable,
        Empty), the server assignor as its protocol, and each member's partitions, pending revocations
        included; GroupNotFound when the coordinator does not know it."""
        from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest
        from kio.schema.types import GroupId

        from staticfleet.admin.kio_requests import KioRequest

        async def describe(admin: Any) -> tuple[int, Any]:
            node_id = await admin._find_coordinator_id(group_id)
            request = KioRequest(
                ConsumerGroupDescribeRequest(
                    group_ids=(GroupId(group_id),), include_authorized_operations=False
                )
            )
            return node_id, await admin._manager.send(request, node_id=node_id)

        def run(admin: Any) -> GroupDescription:
            node_id, response = admin._manager.run(describe, admin)
            return _consumer_group_description(response.groups[0], self._node(admin, node_id))

        return self._call(f"describing consumer group {group_id}", run)

    # -- topics ---------------------------------------------------------------------------------------------

    def missing_topics(self, topics: Sequence[str]) -> list[str]:
        """Those of `topics` the cluster does not have, in the order given: a Metadata request for them
        that creates none. A topic the connection may not describe (TOPIC_AUTHORIZATION_FAILED) is not
        called missing."""

        def run(admin: Any) -> list[str]:
            answers = {str(t["name"]): int(t["error_code"]) for t in admin.describe_topics(list(topics))}
            return [topic for topic in topics if answers.get(topic) == ErrorCode.unknown_topic_or_partition]

        return self._call("listing topics", run)

    # -- remove members -------------------------------------------------------------------------------------

    def remove_members(
        self, group_id: str, instance_ids: Iterable[str], reason: str | None = None
    ) -> RemovalReport:
        """One LeaveGroup v3+ batch: each instance id with an empty member id (KIP-345's admin removal).

        Per-member UNKNOWN_MEMBER_ID means the group has no such member (already gone): `ok` counts it
        as success. A top-level error raises.
        """
        from kafka.admin import MemberToRemove

        ids = list(dict.fromkeys(instance_ids))
        if not ids:
            return RemovalReport(group_id, ())

        def run(admin: Any) -> RemovalReport:
            members = [MemberToRemove(member_id=None, group_instance_id=i, reason=reason) for i in ids]
            answers: dict[str, Any] = admin.remove_group_members(group_id, members)
            results = []
            for instance_id in ids:
                results.append(MemberRemoval(instance_id, _answer_code(answers, instance_id, -1)))
            return RemovalReport(group_id, tuple(results))

        return self._call(f"removing {', '.join(ids)} from group {group_id}", run)

    # -- holding a join phase --------------------------------------------------------------------------------

    def hold_join_phase(
        self, group_id: str, *, protocol_type: str, protocol: str, session_timeout_ms: int
    ) -> str:
        """Registers a pending member (KIP-394) and returns its member id.

        A dynamic JoinGroup v4+ without a member id is answered at once with MEMBER_ID_REQUIRED and a member
        id the coordinator then waits for: no join phase of the group completes while a pending member
        exists (Kafka's `hasAllMembersJoined`). It ends when `release_join_phase` removes it or after
        `session_timeout_ms`, and the pending member itself never joins, so it is assigned nothing and
        starts no rebalance. `protocol_type` and `protocol` must be ones the group's members support.
        """
        from kafka.protocol.consumer import JoinGroupRequest

        async def join(admin: Any) -> Any:
            node_id = await admin._find_coordinator_id(group_id)
            request = JoinGroupRequest(
                group_id=group_id,
                session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=session_timeout_ms,
                member_id="",
                group_instance_id=None,
                protocol_type=protocol_type,
                protocols=[(protocol, _EMPTY_SUBSCRIPTION)],
                min_version=5,
            )
            return await admin._manager.send(request, node_id=node_id)

        def run(admin: Any) -> str:
            response = admin._manager.run(join, admin)
            code = int(response.error_code)
            if code == ErrorCode.member_id_required and response.member_id:
                return str(response.member_id)
            if code == ErrorCode.none:  # joined as a real member: leave at once rather than hold anything
                self._leave(admin, group_id, str(response.member_id))
                raise KafkaErrorResponse(code, f"holding the join phase of {group_id}: no pending member")
            raise KafkaErrorResponse(code, f"holding the join phase of {group_id}: {error_name(code)}")

        return self._call(f"holding the join phase of group {group_id}", run)

    def release_join_phase(self, group_id: str, member_id: str) -> bool:
        """Removes the pending member `hold_join_phase` registered (LeaveGroup v3+ by member id), so that a
        join phase waiting only for it completes now. False when it had already expired."""

        def run(admin: Any) -> bool:
            return self._leave(admin, group_id, member_id)

        return self._call(f"releasing the join phase of group {group_id}", run)

    @staticmethod
    def _leave(admin: Any, group_id: str, member_id: str) -> bool:
        """Removes one member by its member id (kafka-python's LeaveGroup): True when it left, False
        when the group had no such member. Any other error raises."""
        from kafka.admin import MemberToRemove

        answers = admin.remove_group_members(group_id, [MemberToRemove(member_id=member_id)])
        code = _answer_code(answers, member_id, ErrorCode.unknown_member_id)
        if code not in (ErrorCode.none, ErrorCode.unknown_member_id):
            raise KafkaErrorResponse(code, f"leaving group {group_id}: {error_name(code)}")
        return code == ErrorCode.none

    # -- offsets ---------------------------------------------------------------------------------------------

    def partition_offsets(self, group_id: str, topics: Iterable[str]) -> tuple[PartitionOffsets, ...]:
        """Every partition of `topics` with the group's committed offset (OffsetFetch) and the log-end
        offset (ListOffsets, latest). Topics that do not exist yet have no partitions."""
        from kafka import TopicPartition
        from kafka.admin import OffsetSpec

        names = sorted(set(topics))
        if not names:
            return ()

        def run(admin: Any) -> tuple[PartitionOffsets, ...]:
            partitions = sorted(
                TopicPartition(t["name"], p["partition_index"])
                for t in admin.describe_topics(names)
                if not t.get("error_code")
                for p in t.get("partitions", [])
            )
            if not partitions:
                return ()
            committed = admin.list_group_offsets({group_id: partitions}).get(group_id, {})
            ends = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in partitions})
            rows = []
            for tp in partitions:
                done = committed.get(tp)
                end = ends.get(tp)
                rows.append(
                    PartitionOffsets(
                        topic=tp.topic,
                        partition=tp.partition,
                        committed=done.offset if done is not None and done.offset >= 0 else None,
                        log_end=end.offset if end is not None and end.offset >= 0 else None,
                    )
                )
            return tuple(rows)

        return self._call(f"reading the offsets of group {group_id}", run)

    # -- group configs -------------------------------------------------------------------------------------

    def describe_group_configs(self, group_id: str) -> dict[str, str]:
        from kafka.protocol.admin import DescribeConfigsRequest

        def run(admin: Any) -> dict[str, str]:
            request = DescribeConfigsRequest(resources=[(RESOURCE_GROUP, group_id, None)])
            response = admin._manager.run(admin._manager.send, request)
            result = response.results[0]
            if result.error_code:
                raise KafkaErrorResponse(
                    result.error_code,
                    f"describing the configs of group {group_id}: {error_name(result.error_code)} "
                    f"{result.error_message or ''}".rstrip(),
                )
            return {c.name: c.value for c in result.configs if c.value is not None}

        return self._call(f"describing the configs of group {group_id}", run)

    def set_group_config(self, group_id: str, name: str, value: str | None) -> None:
        """IncrementalAlterConfigs on the GROUP resource: SET value, or DELETE when value is None.

        ConfigRejected carries the cluster's error (Apache Kafka rejects keys it does not know); a key
        the cluster said it does not know is refused again without asking while this connection lasts
        (its deletion is still sent: Kafka answers NONE to deleting a key it never had)."""
        from kafka.protocol.admin import IncrementalAlterConfigsRequest

        refused = self._refused_keys.get(name) if value is not None else None
        if refused is not None:
            code, detail = refused
            raise ConfigRejected(code, f"group {group_id} config {name}: {detail} (refused before)")

        def run(admin: Any) -> None:
            op = _DELETE if value is None else _SET
            request = IncrementalAlterConfigsRequest(
                resources=[(RESOURCE_GROUP, group_id, [(name, op, value)])], validate_only=False
            )
            response = admin._manager.run(admin._manager.send, request)
            answer = response.responses[0]
            if answer.error_code:
                detail = error_name(answer.error_code) + (
                    f": {answer.error_message}" if answer.error_message else ""
                )
                text = f"group {group_id} config {name}: {detail}"
                if answer.error_code in (ErrorCode.invalid_config, ErrorCode.invalid_request):
                    if UNKNOWN_GROUP_CONFIG in (answer.error_message or ""):  # the key, not its value
                        self._refused_keys[name] = (answer.error_code, detail)
                    raise ConfigRejected(answer.error_code, text)
                raise KafkaErrorResponse(answer.error_code, text)

        self._call(f"changing config {name} of group {group_id}", run)

    # -- users and ACLs (what the operator provisions for a fleet) ------------------------------------------

    def scram_mechanisms(self, user: str) -> frozenset[str]:
        """The SCRAM mechanisms `user` has credentials for (DescribeUserScramCredentials); none when the
        cluster does not know the user."""

        def run(admin: Any) -> frozenset[str]:
            found = admin.describe_user_scram_credentials([user]).get(user) or {}
            if found.get("error"):  # RESOURCE_NOT_FOUND: no credential of any mechanism
                return frozenset()
            return frozenset(
                info["mechanism"].name.replace("_", "-") for info in found.get("credential_infos", [])
            )

        return self._call(f"describing the SCRAM credentials of {user}", run)

    def upsert_scram(self, user: str, mechanism: str, password: str, iterations: int = 4096) -> None:
        """AlterUserScramCredentials: create or replace `user`'s credential for `mechanism` (the salted
        password is computed here; the password itself never leaves this process)."""
        from kafka.admin import UserScramCredentialUpsertion

        def run(admin: Any) -> None:
            change = UserScramCredentialUpsertion(user, mechanism, password, iterations=iterations)
            error = admin.alter_user_scram_credentials([change]).get(user)
            if error is not None:
                raise KafkaErrorResponse(-1, f"setting the {mechanism} credential of {user}: {error}")

        self._call(f"setting the {mechanism} credential of {user}", run)

    def delete_scram(self, user: str, mechanisms: Iterable[str]) -> None:
        """Removes `user`'s credentials for these mechanisms; a credential already gone is no error."""
        from kafka.admin import UserScramCredentialDeletion

        present = self.scram_mechanisms(user) & frozenset(mechanisms)
        if not present:
            return

        def run(admin: Any) -> None:
            changes = [UserScramCredentialDeletion(user, m) for m in sorted(present)]
            error = admin.alter_user_scram_credentials(changes).get(user)
            if error is not None:
                raise KafkaErrorResponse(-1, f"deleting the credentials of {user}: {error}")

        self._call(f"deleting the SCRAM credentials of {user}", run)

    def acls_of(self, principal: str) -> frozenset[AclBinding]:
        """Every ACL naming `principal` (DescribeAcls). KafkaErrorResponse SECURITY_DISABLED when the
        cluster has no authorizer."""
        from kafka.admin import (
            ACLFilter,
            ACLOperation,
            ACLPermissionType,
            ACLResourcePatternType,
            ResourcePatternFilter,
            ResourceType,
        )

        def run(admin: Any) -> frozenset[AclBinding]:
            pattern = ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY)
            acls, _ = admin.describe_acls(
                ACLFilter(principal, None, ACLOperation.ANY, ACLPermissionType.ANY, pattern)
            )
            return frozenset(_binding(acl) for acl in acls)

        return self._call(f"describing the ACLs of {principal}", run)

    def create_acls(self, bindings: Iterable[AclBinding]) -> None:
        """CreateAcls; an ACL that exists already is no error (Kafka answers NONE)."""
        wanted = sorted(set(bindings))
        if not wanted:
            return

        def run(admin: Any) -> None:
            result = admin.create_acls([_kafka_acl(b) for b in wanted])
            if result["failed"]:
                names = ", ".join(sorted({getattr(e, "message", str(e)) for e in result["failed"]}))
                code = int(getattr(result["failed"][0], "errno", -1))
                raise KafkaErrorResponse(code, f"creating ACLs: {names}")

        self._call(f"creating {len(wanted)} ACLs", run)

    def delete_acls(self, bindings: Iterable[AclBinding]) -> None:
        """DeleteAcls, one exact filter per binding (a binding already gone matches nothing)."""
        from kafka.admin import ACLFilter, ResourcePatternFilter

        doomed = sorted(set(bindings))
        if not doomed:
            return

        def run(admin: Any) -> None:
            filters = []
            for b in doomed:
                acl = _kafka_acl(b)
                pattern = acl.resource_pattern
                filters.append(
                    ACLFilter(
                        acl.principal,
                        acl.host,
                        acl.operation,
                        acl.permission_type,
                        ResourcePatternFilter(
                            pattern.resource_type, pattern.resource_name, pattern.pattern_type
                        ),
                    )
                )
            for _, _, error in admin.delete_acls(filters):
                code = int(getattr(error, "errno", None) or 0)
                if code:
                    raise KafkaErrorResponse(code, f"deleting ACLs: {error_name(code)}")

        self._call(f"deleting {len(doomed)} ACLs", run)


def _binding(acl: Any) -> AclBinding:
    pattern = acl.resource_pattern
    return AclBinding(
        resource_type=pattern.resource_type.name,
        name=pattern.resource_name,
        principal=acl.principal,
        operation=acl.operation.name,
        pattern=pattern.pattern_type.name,
        host=acl.host,
        permission=acl.permission_type.name,
    )


def _kafka_acl(binding: AclBinding) -> Any:
    from kafka.admin import (
        ACL,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePattern,
        ResourceType,
    )

    return ACL(
        principal=binding.principal,
        host=binding.host,
        operation=ACLOperation[binding.operation],
        permission_type=ACLPermissionType[binding.permission],
        resource_pattern=ResourcePattern(
            ResourceType[binding.resource_type], binding.name, ACLResourcePatternType[binding.pattern]
        ),
    )


def _group_description(group: Any, coordinator: Node) -> GroupDescription:
    code = int(group.error_code)
    state = str(group.group_state)
    if code == ErrorCode.group_id_not_found or (
        code == ErrorCode.none and group_state(state) is GroupState.DEAD
    ):
        raise GroupNotFound(
            f"group {group.group_id} does not exist on the coordinator at {coordinator.address}"
        )
    if code:
        raise KafkaErrorResponse(
            code,
            f"describing group {group.group_id}: {error_name(code)} {group.error_message or ''}".rstrip(),
        )
    consumer = group.protocol_type == "consumer"
    members = tuple(
        MemberDescription(
            member_id=m.member_id,
            instance_id=getattr(m, "group_instance_id", None),
            client_id=m.client_id,
            client_host=m.client_host,
            partitions=assignment_partitions(bytes(m.member_assignment))
            if consumer and m.member_assignment
            else None,
        )
        for m in group.members
    )
    return GroupDescription(
        group_id=group.group_id,
        state=state,
        protocol_type=group.protocol_type or "",
        protocol=group.protocol_data or "",
        members=tuple(sorted(members, key=lambda m: natural_key(m.instance_id or m.member_id))),
        coordinator=coordinator,
    )


def _consumer_group_description(group: Any, coordinator: Node) -> GroupDescription:
    code = int(group.error_code)
    if code == ErrorCode.group_id_not_found:
        raise GroupNotFound(
            f"consumer group {group.group_id} does not exist on the coordinator at {coordinator.address}"
        )
    if code:
        why = f"{error_name(code)} {group.error_message or ''}".rstrip()
        raise KafkaErrorResponse(code, f"describing consumer group {group.group_id}: {why}")
    members = [
        MemberDescription(
            member_id=m.member_id,
            instance_id=m.instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            partitions=_topic_partitions(m.assignment),
            member_epoch=int(m.member_epoch),
            target_partitions=_topic_partitions(m.target_assignment),
        )
        for m in group.members
    ]
    return GroupDescription(
        group_id=group.group_id,
        state=str(group.group_state),
        protocol_type="consumer",
        protocol=group.assignor_name or "",
        members=tuple(sorted(members, key=lambda m: natural_key(m.instance_id or m.member_id))),
        coordinator=coordinator,
        group_epoch=int(group.group_epoch),
        assignment_epoch=int(group.assignment_epoch),
    )


def _topic_partitions(assignment: Any) -> dict[str, list[int]]:
    """A ConsumerGroupDescribe assignment as topic name -> sorted partitions."""
    partitions: dict[str, list[int]] = {}
    for t in assignment.topic_partitions:
        partitions.setdefault(str(t.topic_name), []).extend(int(p) for p in t.partitions)
    return {topic: sorted(ps) for topic, ps in sorted(partitions.items())}


def natural_key(text: str) -> tuple[Any, ...]:
    """Sorts `x-2` before `x-10`."""
    import re

    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def _answer_code(answers: Mapping[str, Any], key: str, absent: int) -> int:
    """The error code kafka-python's `remove_group_members` gave one member (its answers map the member
    to an error class); `absent` when the answer does not name it."""
    error_class = answers.get(key)
    return int(getattr(error_class, "errno", -1)) if error_class is not None else absent

"""The Kafka-protocol admin path shared by the operator and the `staticfleet members|group` commands."""

from staticfleet.admin.client import GroupAdmin, natural_key
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
from staticfleet.admin.model import (
    AclBinding,
    GroupDescription,
    LagSummary,
    MemberDescription,
    MemberRemoval,
    Node,
    PartitionOffsets,
    RemovalReport,
    lag_summary,
)

__all__ = [
    "AclBinding",
    "AdminError",
    "AuthenticationFailed",
    "ConfigRejected",
    "CoordinatorUnreachable",
    "GroupAdmin",
    "GroupDescription",
    "GroupNotFound",
    "KafkaConnection",
    "KafkaErrorResponse",
    "LagSummary",
    "MemberDescription",
    "MemberRemoval",
    "Node",
    "PartitionOffsets",
    "RemovalReport",
    "error_name",
    "lag_summary",
    "natural_key",
]

"""The Kafka-protocol admin path shared by the operator and the `staticfleet members|group` commands."""

from staticfleet.admin.client import GroupAdmin, KafkaConnection, natural_key
from staticfleet.admin.errors import (
    AdminError,
    ConfigRejected,
    CoordinatorUnreachable,
    GroupNotFound,
    KafkaErrorResponse,
    error_name,
)
from staticfleet.admin.model import GroupDescription, MemberDescription, MemberRemoval, Node, RemovalReport

__all__ = [
    "AdminError",
    "ConfigRejected",
    "CoordinatorUnreachable",
    "GroupAdmin",
    "GroupDescription",
    "GroupNotFound",
    "KafkaConnection",
    "KafkaErrorResponse",
    "MemberDescription",
    "MemberRemoval",
    "Node",
    "RemovalReport",
    "error_name",
    "natural_key",
]

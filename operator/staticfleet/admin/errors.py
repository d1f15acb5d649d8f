"""What can go wrong when administering a group, each with a message that says what to do."""

from __future__ import annotations

# Kafka error codes the admin path interprets (Errors.java).
NONE = 0
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
UNKNOWN_MEMBER_ID = 25
INVALID_CONFIG = 40
INVALID_REQUEST = 42
GROUP_ID_NOT_FOUND = 69
FENCED_INSTANCE_ID = 82

_NAMES = {
    -1: "UNKNOWN_SERVER_ERROR",
    0: "NONE",
    14: "COORDINATOR_LOAD_IN_PROGRESS",
    15: "COORDINATOR_NOT_AVAILABLE",
    16: "NOT_COORDINATOR",
    24: "INVALID_GROUP_ID",
    25: "UNKNOWN_MEMBER_ID",
    30: "GROUP_AUTHORIZATION_FAILED",
    35: "UNSUPPORTED_VERSION",
    40: "INVALID_CONFIG",
    42: "INVALID_REQUEST",
    69: "GROUP_ID_NOT_FOUND",
    82: "FENCED_INSTANCE_ID",
}


def error_name(code: int) -> str:
    """Kafka's name for an error code (falls back to the number for codes the admin path never meets)."""
    known = _NAMES.get(code)
    if known is not None:
        return known
    try:
        import kafka.errors

        name = kafka.errors.for_code(code).message
        return str(name) if name else f"ERROR_{code}"
    except (ImportError, KeyError, AttributeError):
        return f"ERROR_{code}"


class AdminError(Exception):
    """An admin operation failed."""


class CoordinatorUnreachable(AdminError):
    """No broker (or no group coordinator) answered within the timeout."""


class GroupNotFound(AdminError):
    """The coordinator does not know the group."""


class KafkaErrorResponse(AdminError):
    """The coordinator answered with an error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.name = error_name(code)


class ConfigRejected(KafkaErrorResponse):
    """The cluster refused a group config (Apache Kafka does so for staticfleet's own keys)."""

"""What can go wrong when administering a group, each with a message that says what to do."""

from __future__ import annotations

from kio.schema.errors import ErrorCode


def error_name(code: int) -> str:
    """Kafka's name for an error code, as its tools print it (the number for a code Kafka never had)."""
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"ERROR_{code}"


class AdminError(Exception):
    """An admin operation failed."""


class CoordinatorUnreachable(AdminError):
    """No broker (or no group coordinator) answered within the timeout."""


class AuthenticationFailed(CoordinatorUnreachable):
    """The cluster refused the SASL login (wrong mechanism, user or password)."""


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

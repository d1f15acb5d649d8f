"""Deterministic crash points for resilience tests: STATICFLEET_OPERATOR_EXIT_AFTER=<step> makes the
operator SIGKILL itself right after that step (no cleanup, no status write, no Event), so a test can
check that a restarted operator, or another replica, finishes the job.

Scale-down: scale-down-recorded (the record is in status), statefulset-shrunk (the StatefulSet is shrunk
and the status written), members-removed (the LeaveGroup batch answered, status not yet written).
Scale-up: pre-registered (the coordinator holds the join phase for the new ids and status records it;
the StatefulSet is not yet grown), statefulset-grown (the StatefulSet has the new size; status not yet
written), scale-up-recorded (the pass's status is written; its Events not yet posted)."""

from __future__ import annotations

import logging
import os
import signal

EXIT_AFTER_ENV = "STATICFLEET_OPERATOR_EXIT_AFTER"
SCALE_DOWN_CHECKPOINTS = ("scale-down-recorded", "statefulset-shrunk", "members-removed")
SCALE_UP_CHECKPOINTS = ("pre-registered", "statefulset-grown", "scale-up-recorded")

log = logging.getLogger(__name__)


def checkpoint(step: str) -> None:
    if os.environ.get(EXIT_AFTER_ENV) == step:
        log.warning("killing myself after step %s (%s is set)", step, EXIT_AFTER_ENV)
        logging.shutdown()
        os.kill(os.getpid(), signal.SIGKILL)

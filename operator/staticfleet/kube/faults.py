"""Deterministic crash points for resilience tests: STATICFLEET_OPERATOR_EXIT_AFTER=<point> makes the
operator SIGKILL itself right after that step of a pass (no cleanup, no status write, no Event), so a
test can check that a restarted operator, or another replica, finishes the job.

Scale-down: scale-down-recorded (the Checkpoint that makes the record durable), statefulset-shrunk (the
StatefulSet is shrunk and the pass's status written), members-removed (the Checkpoint after the
LeaveGroup batch: its answer is recorded, the rest of the pass not done). Scale-up: pre-registered (the
Checkpoint after pre-registration: the coordinator holds the join phase for the new ids and status
records it; the StatefulSet is not yet grown), statefulset-grown (the StatefulSet has the new size;
status not yet written), scale-up-recorded (the pass's status is written; its Events not yet posted).
Provisioning: fleet-credential-set (the fleet's SCRAM credential is set, its Secret not yet written)."""

from __future__ import annotations

import logging
import os
import signal

EXIT_AFTER_ENV = "STATICFLEET_OPERATOR_EXIT_AFTER"

SCALE_DOWN_RECORDED = "scale-down-recorded"
STATEFULSET_SHRUNK = "statefulset-shrunk"
MEMBERS_REMOVED = "members-removed"
PRE_REGISTERED = "pre-registered"
STATEFULSET_GROWN = "statefulset-grown"
SCALE_UP_RECORDED = "scale-up-recorded"
FLEET_CREDENTIAL_SET = "fleet-credential-set"

SCALE_DOWN_CRASH_POINTS = (SCALE_DOWN_RECORDED, STATEFULSET_SHRUNK, MEMBERS_REMOVED)
SCALE_UP_CRASH_POINTS = (PRE_REGISTERED, STATEFULSET_GROWN, SCALE_UP_RECORDED)

log = logging.getLogger(__name__)


def crash_after(point: str) -> None:
    if os.environ.get(EXIT_AFTER_ENV) == point:
        log.warning("killing myself after step %s (%s is set)", point, EXIT_AFTER_ENV)
        logging.shutdown()
        os.kill(os.getpid(), signal.SIGKILL)

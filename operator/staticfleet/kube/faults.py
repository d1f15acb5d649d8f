"""A deterministic crash point for resilience tests: STATICFLEET_OPERATOR_EXIT_AFTER=<step> makes the
operator exit abruptly (exit code 70, no cleanup) right after that step, so a test can check that a
restarted operator finishes the job. Steps: scale-down-recorded (the record is in status),
statefulset-shrunk (the StatefulSet is shrunk and the status written), members-removed (the LeaveGroup
batch answered, status not yet written)."""

from __future__ import annotations

import logging
import os

EXIT_AFTER_ENV = "STATICFLEET_OPERATOR_EXIT_AFTER"
EXIT_CODE = 70

log = logging.getLogger(__name__)


def checkpoint(step: str) -> None:
    if os.environ.get(EXIT_AFTER_ENV) == step:
        log.warning("exiting after step %s (%s is set)", step, EXIT_AFTER_ENV)
        logging.shutdown()
        os._exit(EXIT_CODE)

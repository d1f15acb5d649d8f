"""One active operator among replicas: leader election on a coordination.k8s.io Lease.

The kubernetes client's own leader election (LeaseLock) does the work, as Kubernetes' controllers do:
followers do nothing but try to take the Lease; the holder renews it every `retry_s` seconds and runs
the operator. A holder that cannot renew within `renew_deadline_s` exits at once (another replica may
already have taken over, and two acting operators is the one thing to avoid); its Deployment restarts
it as a follower. A holder that dies is replaced once its Lease expires (`lease_s`).

(kopf's own peering would do too, but it pauses every operator of equal priority and needs its own
CRDs; a Lease needs nothing the cluster does not already have.)
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

LOST_LEASE_EXIT = 75


@dataclass(frozen=True, slots=True)
class Election:
    name: str
    namespace: str
    identity: str = f"{socket.gethostname()}-{os.getpid()}"
    lease_s: int = 15
    renew_deadline_s: int = 10
    retry_s: int = 2


def _lost(election: Election) -> None:
    log.error("lost the Lease %s/%s: exiting, so that one operator acts", election.namespace, election.name)
    logging.shutdown()
    os._exit(LOST_LEASE_EXIT)


def run_as_leader(election: Election, run: Callable[[], int]) -> int:
    """Blocks until this process holds the Lease, then returns run()'s result while renewing it.
    The kubernetes client's default configuration must be loaded (the Lease is read with it)."""
    from kubernetes.leaderelection import electionconfig, leaderelection
    from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

    leading = threading.Event()

    def started() -> None:
        leading.set()
        threading.Event().wait()  # the renewal goes on while this thread lives: for as long as we run

    config = electionconfig.Config(
        LeaseLock(election.name, election.namespace, election.identity),  # type: ignore[no-untyped-call]
        lease_duration=election.lease_s,
        renew_deadline=election.renew_deadline_s,
        retry_period=election.retry_s,
        onstarted_leading=started,
        onstopped_leading=lambda: _lost(election),
    )

    def elect() -> None:
        while True:
            try:
                leaderelection.LeaderElection(config).run()  # type: ignore[no-untyped-call]
            except Exception:
                log.exception("leader election failed; trying again")
            if leading.is_set():  # renewal stopped, one way or another
                _lost(election)
            time.sleep(election.retry_s)

    log.info("waiting to lead (Lease %s/%s, as %s)", election.namespace, election.name, election.identity)
    threading.Thread(target=elect, name="leader-election", daemon=True).start()
    leading.wait()
    log.info("leading (Lease %s/%s)", election.namespace, election.name)
    return run()

"""One active operator among replicas: leader election on a coordination.k8s.io Lease.

The kubernetes client's own leader election (LeaseLock) does the work, as Kubernetes' controllers do:
followers do nothing but try to take the Lease; the holder renews it every `retry_s` seconds and runs
the operator. A holder that cannot renew within `renew_deadline_s` exits at once (another replica may
already have taken over, and two acting operators is the one thing to avoid); its Deployment restarts
it as a follower. A holder that dies is replaced once its Lease expires (`lease_s`); one that stops
cleanly (SIGTERM: a rollout, a drained node) first gives the Lease up, so a follower takes over on its
next try instead of after the expiry, as client-go's ReleaseOnCancel does. A follower stopped with SIGTERM
ends at once: as the first process of its container it would otherwise ignore the signal, and the kubelet
would wait out the pod's grace period before killing it.

(kopf's own peering would do too, but it pauses every operator of equal priority and needs its own
CRDs; a Lease needs nothing the cluster does not already have.)
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

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


def _exit_now(status: int) -> NoReturn:
    """Ends the process with `status`, its logs flushed, without the interpreter's shutdown: the election's
    daemon thread may be in the middle of a request or a log line, and finalizing around it can abort the
    process (status -6, not the one meant)."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(status)


def _exit_status(stopped: SystemExit) -> int:
    """The status the interpreter would end with for `stopped` (a message goes to stderr, as it would)."""
    if stopped.code is None or isinstance(stopped.code, int):
        return stopped.code or 0
    print(stopped.code, file=sys.stderr)
    return 1


def _lost(election: Election) -> None:
    log.error("lost the Lease %s/%s: exiting, so that one operator acts", election.namespace, election.name)
    _exit_now(LOST_LEASE_EXIT)


def _releasable_lock(election: Election, released: threading.Event) -> Any:
    """The client's LeaseLock, except that it renews nothing once `released` is set."""
    from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

    class ReleasableLeaseLock(LeaseLock):
        def update(self, name: str, namespace: str, updated_record: Any) -> bool:
            if released.is_set():
                return False
            return bool(super().update(name, namespace, updated_record))  # type: ignore[no-untyped-call]

        def create(self, name: str, namespace: str, election_record: Any) -> bool:
            if released.is_set():
                return False
            return bool(super().create(name, namespace, election_record))  # type: ignore[no-untyped-call]

    return ReleasableLeaseLock(election.name, election.namespace, election.identity)  # type: ignore[no-untyped-call]


def release(election: Election, attempts: int = 3) -> bool:
    """Clears the Lease's holder if it is still this process; the resourceVersion guards against a
    renewal or a new holder in between. False when someone else holds it (nothing to give up)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    api = client.CoordinationV1Api()
    for _ in range(attempts):
        try:
            lease = api.read_namespaced_lease(election.name, election.namespace)
            if lease.spec is None or lease.spec.holder_identity != election.identity:
                return False
            lease.spec.holder_identity = None
            api.replace_namespaced_lease(election.name, election.namespace, lease)
            log.info("gave up the Lease %s/%s", election.namespace, election.name)
            return True
        except ApiException as exc:
            if exc.status != 409:  # a conflict is read again; anything else leaves it to expire
                log.warning("could not give up the Lease %s/%s: %s", election.namespace, election.name, exc)
                return False
    return False


def _stop_on_sigterm(leading: threading.Event) -> None:
    """SIGTERM ends a replica waiting to lead at once, with status 0, wherever its main thread is; once it
    leads, SIGTERM raises SystemExit so that the Lease is given up on the way out (until kopf puts its own
    clean stop in place). A process that handles no SIGTERM is killed by it, except the first process of
    a container (a pod's), which ignores it. Only the main thread may set handlers; elsewhere nothing
    changes."""
    if threading.current_thread() is not threading.main_thread():
        return

    def stop(signum: int, frame: object) -> None:
        if leading.is_set():
            raise SystemExit(0)
        log.info("stopped while waiting to lead (SIGTERM)")
        _exit_now(0)

    signal.signal(signal.SIGTERM, stop)


def run_as_leader(election: Election, run: Callable[[], int]) -> NoReturn:
    """Blocks until this process holds the Lease, then runs run() while renewing it, gives the Lease up
    once run() has returned, and ends the process with run()'s status. The kubernetes client's default
    configuration must be loaded (the Lease is read with it)."""
    from kubernetes.leaderelection import electionconfig, leaderelection

    leading = threading.Event()
    released = threading.Event()

    def started() -> None:
        leading.set()
        threading.Event().wait()  # the renewal goes on while this thread lives: for as long as we run

    config = electionconfig.Config(  # type: ignore[no-untyped-call]
        _releasable_lock(election, released),
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

    _stop_on_sigterm(leading)
    log.info("waiting to lead (Lease %s/%s, as %s)", election.namespace, election.name, election.identity)
    threading.Thread(target=elect, name="leader-election", daemon=True).start()
    leading.wait()
    log.info("leading (Lease %s/%s)", election.namespace, election.name)
    try:
        status = run()
    except SystemExit as stopped:  # SIGTERM before kopf took it over, or run() ending the process itself
        status = _exit_status(stopped)
    finally:
        released.set()  # no renewal after this: the Lease is given up, or left to expire
        release(election)
    _exit_now(status)

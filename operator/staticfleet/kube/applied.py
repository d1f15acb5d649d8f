"""What the operator last applied of each fleet's children, so that a pass at rest applies nothing.

Every pass builds the StatefulSet, the headless Service and the PDB again; applying them again is a no-op on
the server, but three requests a pass, every pass of every fleet. They are applied again only when they
differ from what this process last applied, when someone changed the StatefulSet since (a `kubectl scale
statefulset`, an edit, another operator's apply: its spec's generation, its labels or annotations, or a new
object under the same name), and at least once every REAPPLY_S, which puts a deleted or edited Service or
PDB back. The StatefulSet controller's status updates change none of these: a rollout's passes, which follow
its pods, apply nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from staticfleet.kube.spec import Manifest

REAPPLY_S = 60.0


@dataclass(frozen=True, slots=True)
class Applied:
    children: tuple[Manifest, ...]
    statefulset_version: str
    """The StatefulSet's `spec_version` as our apply left it."""
    at: float


def spec_version(statefulset: Manifest | None) -> str | None:
    """What of a StatefulSet changes when someone changes it (uid, spec generation, labels, annotations),
    and not when its controller writes its status, as the resourceVersion does."""
    if statefulset is None:
        return None
    meta = statefulset["metadata"]
    return json.dumps(
        [meta.get("uid"), meta.get("generation"), meta.get("labels"), meta.get("annotations")],
        sort_keys=True,
    )


def needs_apply(
    last: Applied | None, children: tuple[Manifest, ...], statefulset: Manifest | None, now: float
) -> bool:
    """Whether the children must be applied this pass. Pure."""
    return (
        last is None
        or last.children != children
        or spec_version(statefulset) != last.statefulset_version
        or now - last.at >= REAPPLY_S
    )


class AppliedChildren:
    """Per fleet (namespace, name). A fleet's passes never overlap (the operator's per-object locks)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._last: dict[tuple[str, str], Applied] = {}

    def needed(
        self, fleet: tuple[str, str], children: tuple[Manifest, ...], statefulset: Manifest | None
    ) -> bool:
        return needs_apply(self._last.get(fleet), children, statefulset, self._clock())

    def first(self, fleet: tuple[str, str]) -> bool:
        """Nothing applied to this fleet by this process yet."""
        return fleet not in self._last

    def record(self, fleet: tuple[str, str], children: tuple[Manifest, ...], statefulset: Manifest) -> None:
        self._last[fleet] = Applied(children, spec_version(statefulset) or "", self._clock())

    def forget(self, fleet: tuple[str, str]) -> None:
        self._last.pop(fleet, None)

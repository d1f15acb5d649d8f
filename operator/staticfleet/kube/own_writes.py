"""The status writes this process made, so that their watch events start no pass of their own.

A pass writes the status on a pass thread; the resource's watch runs on kopf's event loop. The write's
watch event can be handled before the pass thread has read the write's response (under load, it often
is), so the resourceVersion the write left is not yet known then: the status the pass is writing is
noted before the write, and an event that shows it, with nothing else changed, is recognised by it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

Key = tuple[str, str]


def canonical(status: Mapping[str, Any] | None) -> str:
    """One text per status, whatever the order of its fields."""
    return json.dumps(dict(status or {}), sort_keys=True, default=str)


class OwnStatusWrites:
    def __init__(self) -> None:
        self._versions: dict[Key, str] = {}
        self._statuses: dict[Key, tuple[str, ...]] = {}
        self._guard = threading.Lock()

    def writing(self, key: Key, status: Mapping[str, Any]) -> None:
        """Before the write: the status a pass is about to write."""
        with self._guard:
            self._statuses[key] = (canonical(status),)

    def wrote(self, key: Key, version: str, status: Mapping[str, Any]) -> None:
        """After it: the version it left, and the status the server holds (its schema may have added
        defaults to what was sent)."""
        with self._guard:
            self._versions[key] = version
            self._statuses[key] = (*self._statuses.get(key, ())[:1], canonical(status))

    def version(self, key: Key, version: str | None) -> bool:
        """`version` is the one this process's last write left."""
        with self._guard:
            return version is not None and self._versions.get(key) == version

    def status(self, key: Key, status: Mapping[str, Any] | None) -> bool:
        """`status` is the one this process last wrote, or is writing."""
        with self._guard:
            return canonical(status) in self._statuses.get(key, ())

    def forget(self, key: Key) -> None:
        with self._guard:
            self._versions.pop(key, None)
            self._statuses.pop(key, None)

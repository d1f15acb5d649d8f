"""Fixtures for the Helm chart's tests: the helm CLI (built from the Go module proxy once, cached)."""

from __future__ import annotations

import pytest

from e2e.helm import Helm, ensure_helm


@pytest.fixture(scope="session")
def helm(pytestconfig: pytest.Config) -> Helm:
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():  # let a first build show its progress
        return Helm(ensure_helm())

"""The status a leading replica ends with when run() ends the process itself: the interpreter's own rule."""

from __future__ import annotations

import pytest

from staticfleet.kube.leader import _exit_status


@pytest.mark.parametrize(("code", "status"), [(None, 0), (0, 0), (3, 3), (75, 75)])
def test_a_numeric_or_empty_exit_keeps_its_status(code: int | None, status: int) -> None:
    assert _exit_status(SystemExit(code)) == status


def test_a_message_exits_1_and_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit_status(SystemExit("no kubeconfig")) == 1
    assert capsys.readouterr().err == "no kubeconfig\n"

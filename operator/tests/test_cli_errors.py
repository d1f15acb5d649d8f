"""Bad input to the command line gets one line on stderr that says what was expected, and exit code 2,
before anything starts: no traceback, whatever the command."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from staticfleet.cli import build_parser, main

# The cases people hit first, and the like for ports, durations, URLs and sizes on every command.
BAD = [
    ("group describe --group g --bootstrap-server localhost:abc", "--bootstrap-server"),
    ("group describe --group g --bootstrap-server=", "--bootstrap-server"),
    ("members remove --group g --instance-id x --bootstrap-server a:1,,b:2", "--bootstrap-server"),
    ("members remove --group g --instance-id x --bootstrap-server kafka", "--bootstrap-server"),
    ("members remove --group g --instance-id x --bootstrap-server a:1 --timeout -1", "--timeout"),
    ("operator --log-level foo", "--log-level"),
    ("operator --log-format xml", "--log-format"),
    ("operator --default-bootstrap-servers localhost:abc", "--default-bootstrap-servers"),
    ("operator --default-coordinator-api coordinator:8080", "--default-coordinator-api"),
    ("operator --liveness http://0.0.0.0:99999/healthz", "--liveness"),
    ("operator --readiness /readyz", "--readiness"),
    ("operator --metrics-port 70000", "--metrics-port"),
    ("operator --interval 0", "--interval"),
    ("operator --admin-timeout nan", "--admin-timeout"),
    ("operator --scale-down-step-timeout soon", "--scale-down-step-timeout"),
    ("operator --max-replicas 0", "--max-replicas"),
    ("operator --reconcile-threads 0", "--reconcile-threads"),
    ("operator --ui localhost", "--ui"),
    ("coordinator --data-dir d --log-level foo", "--log-level"),
    ("coordinator --data-dir d --log-format yaml", "--log-format"),
    ("coordinator --data-dir d --listen localhost:99999", "--listen"),
    ("coordinator --data-dir d --http :abc", "--http"),
    ("coordinator --data-dir d --default-partitions 0", "--default-partitions"),
    ("coordinator --data-dir d --group-min-session-timeout-ms -5", "--group-min-session-timeout-ms"),
    ("analyze e --out o --chart-groups -3", "--chart-groups"),
    ("simulate --out o --groups many", "--groups"),
    ("group describe --bootstrap-server a:1", "--group"),
    ("no-such-command", "COMMAND"),
]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    captured = capsys.readouterr()
    return int(exited.value.code or 0), captured.out, captured.err


@pytest.mark.parametrize(("line", "names"), BAD, ids=[line for line, _ in BAD])
def test_bad_input_is_one_line_naming_the_argument_and_exit_code_2(
    line: str, names: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(line.split(" "), capsys)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert err.startswith("staticfleet") and ": error: " in err and names in err, err
    assert "Traceback" not in err


def test_the_message_says_what_was_expected_and_what_was_given(capsys: pytest.CaptureFixture[str]) -> None:
    _, _, err = _run(["group", "describe", "--group", "g", "--bootstrap-server", "localhost:abc"], capsys)
    assert "port 'abc' of 'localhost:abc' is not a number from 1 to 65535" in err
    _, _, err = _run(["operator", "--log-level", "foo"], capsys)
    assert "expected one of DEBUG, INFO, WARNING, ERROR, CRITICAL, got 'foo'" in err


@pytest.mark.parametrize(
    "line",
    [
        "group describe --group g --bootstrap-server localhost:abc",
        "group describe --group g --bootstrap-server ",
        "operator --log-level foo",
        "coordinator --data-dir d --log-level foo",
    ],
)
def test_the_installed_command_prints_no_traceback(line: str) -> None:
    argv = [sys.executable, "-m", "staticfleet.cli", *line.split(" ")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr


# A log record (staticfleet.logs' text format), which a client left running by an earlier test in this
# process may write to the captured stderr while the parser runs: not the parser's output.
_LOG_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [A-Z]+ [\w.]+: ")


def _parser_output(err: str) -> str:
    return "".join(line for line in err.splitlines(keepends=True) if not _LOG_RECORD.match(line))


def _options() -> Iterator[tuple[str, argparse.Action]]:
    """Every option of every command that converts its text (a `type`)."""

    def walk(parser: argparse.ArgumentParser, prefix: str) -> Iterator[tuple[str, argparse.Action]]:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    yield from walk(child, f"{prefix} {name}".strip())
            elif action.option_strings and callable(action.type) and action.type is not str:
                yield prefix, action

    yield from walk(build_parser(), "")


@pytest.mark.parametrize("garbage", ["abc", "", "-1", "1e999", "host:port:9"])
def test_every_converted_option_answers_garbage_with_one_line_or_takes_it(
    garbage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    checked = 0
    for command, action in _options():
        parser = build_parser()
        try:
            parser.parse_args([*command.split(" "), f"{action.option_strings[-1]}={garbage}"])
        except SystemExit as exited:
            err = _parser_output(capsys.readouterr().err)
            if exited.code == 2 and "required" in err:
                checked += 1  # the value passed; another required argument is missing
                continue
            assert exited.code == 2 and err.count("\n") == 1 and action.option_strings[-1] in err, err
        checked += 1
    assert checked > 30


def test_a_departure_signing_key_file_that_cannot_be_used_says_why(tmp_path: Path) -> None:
    from staticfleet.commands.operator import _departure_signing_key

    assert _departure_signing_key(None) is None
    missing = _departure_signing_key(tmp_path / "absent")
    assert (
        isinstance(missing, str) and "--departure-signing-key-file" in missing and "No such file" in missing
    )
    short = tmp_path / "short"
    short.write_text("too short\n")
    assert _departure_signing_key(short) == (
        f"--departure-signing-key-file {short}: 9 bytes, at least 32 expected "
        "(e.g. head -c 48 /dev/urandom | base64)"
    )
    good = tmp_path / "key"
    good.write_text("k" * 48 + "\n")
    assert _departure_signing_key(good) == b"k" * 48  # the newline a Secret's file may end with is not key

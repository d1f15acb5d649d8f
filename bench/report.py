"""Shared output for benchmarks: a JSON result file and a section of docs/benchmarks.md."""

from __future__ import annotations

import json
import os
import platform
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
DOC = ROOT / "docs" / "benchmarks.md"

_HEADER = """# Benchmarks

Measured on the project's CI machine class (2 cores, Debian 12, Python 3.11) unless a section says
otherwise. These machines are shared and noisy: treat single numbers as rough, and ratios measured side
by side in one run as the meaningful figure. Every section names the command that regenerates it.
"""


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "date": time.strftime("%Y-%m-%d"),
    }


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def replace_block(path: Path, name: str, body: str) -> bool:
    """Puts `body` between the markers `<!-- bench:<name> -->` and `<!-- /bench:<name> -->` of `path`, in
    place of what stood there; False, and nothing written, where the file has no such markers."""
    text = path.read_text()
    begin, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    if begin not in text or end not in text:
        return False
    start, stop = text.index(begin) + len(begin), text.index(end)
    path.write_text(text[:start] + "\n" + body + "\n" + text[stop:])
    return True


def publish(
    name: str, title: str, command: str, body: str, data: dict[str, Any], *, doc: Path | None = None
) -> None:
    """Write bench/results/<name>.json and replace the <name> section of docs/benchmarks.md (or `doc`)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps({"machine": machine(), **data}, indent=2) + "\n")
    target = DOC if doc is None else doc
    text = target.read_text() if target.exists() else _HEADER
    section = (
        f"<!-- bench:{name} -->\n## {title}\n\nRegenerate with `{command}` "
        f"({machine()['date']}, Python {machine()['python']}, {machine()['cpus']} CPUs).\n\n{body}\n"
        f"<!-- /bench:{name} -->"
    )
    pattern = re.compile(rf"<!-- bench:{re.escape(name)} -->.*?<!-- /bench:{re.escape(name)} -->", re.S)
    text = (
        pattern.sub(lambda _: section, text)
        if pattern.search(text)
        else text.rstrip() + "\n\n" + section + "\n"
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)

"""The durations an e2e run recorded ($STATICFLEET_E2E_TIMINGS, one JSON line per measurement) as a
Markdown table: how many times each was measured, and the median and the slowest.

    python -m e2e.timings timings.jsonl [more.jsonl ...]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def table(paths: list[Path]) -> str:
    measured: dict[str, list[float]] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                measured.setdefault(str(record["name"]), []).append(float(record["seconds"]))
    rows = ["| measured | runs | median | slowest |", "|---|---:|---:|---:|"]
    for name, seconds in measured.items():
        rows.append(
            f"| {name} | {len(seconds)} | {statistics.median(seconds):.1f} s | {max(seconds):.1f} s |"
        )
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    print(table([Path(a) for a in argv]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""Times the local control plane: start (etcd -> kube-apiserver /readyz -> default ServiceAccount) and stop.

usage: python bench/cluster_start.py [-n 5]
The binaries must be built already (make cluster-binaries); nothing here measures the build.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from e2e.localcluster import binaries
from e2e.localcluster.controlplane import LocalCluster


def measure_once(bin_dir: Path) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="cluster-bench-") as run_dir:
        cluster = LocalCluster(bin_dir, Path(run_dir))
        began = time.monotonic()
        cluster.start()
        timings = dict(cluster.timings, start=time.monotonic() - began)
        stop_began = time.monotonic()
        cluster.stop()
        timings["stop"] = time.monotonic() - stop_began
    return timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", "--runs", type=int, default=5)
    options = parser.parse_args()
    bin_dir = binaries.bin_dir()
    if not binaries.is_built(bin_dir):
        print(f"no binaries in {bin_dir}: run `make cluster-binaries` first", file=sys.stderr)
        return 2
    runs = [measure_once(bin_dir) for _ in range(options.runs)]
    columns = ["etcd", "kube-apiserver", "default-serviceaccount", "start", "stop"]
    print(f"{'run':>4} " + " ".join(f"{c:>22}" for c in columns))
    for number, timings in enumerate(runs, 1):
        print(f"{number:>4} " + " ".join(f"{timings[c]:>21.2f}s" for c in columns))
    print(f"{'median':>4} " + " ".join(f"{statistics.median(r[c] for r in runs):>21.2f}s" for c in columns))
    return 0


if __name__ == "__main__":
    sys.exit(main())

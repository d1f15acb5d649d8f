"""`python -m examples.demo up|down`: what `make demo` and `make demo-down` run."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from e2e.localcluster import binaries
from examples.demo.driver import DemoError, Settings, down, up


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.demo", description=__doc__)
    parser.add_argument("command", choices=("up", "down"), nargs="?", default="up")
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=binaries.cache_dir() / "demo",
        help="the demo's state, local cluster and analysis (default: $STATICFLEET_CACHE/demo)",
    )
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        default=Path(os.environ["KUBECONFIG"]) if os.environ.get("KUBECONFIG") else None,
        help="use this cluster (default: $KUBECONFIG; unset: start a local cluster)",
    )
    parser.add_argument(
        "--run-dir", type=Path, help="the local pod runner's run directory, if not beside the kubeconfig"
    )
    parser.add_argument("--namespace", default="staticfleet-demo")
    parser.add_argument(
        "--release",
        default="staticfleet-demo",
        help="the chart's release (default staticfleet-demo: the README installs `staticfleet`)",
    )
    parser.add_argument(
        "--kind-cluster",
        metavar="NAME",
        help="the kind cluster was created for the demo (by `make demo`): `down` deletes it",
    )
    parser.add_argument(
        "--image",
        default="staticfleet:0.1.0",
        help="the image built from the repository's Dockerfile (ignored by the local pod runner)",
    )
    parser.add_argument(
        "--watch-namespace-only",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the demo's operator watches only --namespace (default), so that it never acts on fleets of "
        "another release, such as the README's",
    )
    parser.add_argument("--pause", type=float, default=5.0, help="seconds between operations")
    parser.add_argument("--rate", type=int, default=20, help="messages per second the producer writes")
    parser.add_argument("--teardown", action="store_true", help="remove everything at the end (CI)")
    parser.add_argument(
        "--keep-namespace", action="store_true", help="with --teardown or down: keep the namespace"
    )
    parser.add_argument(
        "--results",
        type=Path,
        help="write the summary rows as JSON here (default: results.json in --state-dir, the last run's)",
    )
    options = parser.parse_args(argv)
    settings = Settings(
        state_dir=options.state_dir,
        kubeconfig=options.kubeconfig,
        run_dir=options.run_dir,
        namespace=options.namespace,
        release=options.release,
        kind_cluster=options.kind_cluster,
        image=options.image,
        watch_namespace_only=options.watch_namespace_only,
        pause_s=options.pause,
        rate=options.rate,
        teardown=options.teardown,
        keep_namespace=options.keep_namespace,
        results=options.results or options.state_dir / "results.json",
    )
    try:
        return up(settings) if options.command == "up" else down(settings)
    except (DemoError, TimeoutError) as error:
        print(f"\ndemo failed: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

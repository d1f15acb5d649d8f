"""The `staticfleet` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from staticfleet import __version__
from staticfleet.commands.arguments import Parser

Command = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = Parser(
        prog="staticfleet",
        description="Kafka consumer fleets on Kubernetes with static group membership.",
    )
    parser.add_argument("--version", action="version", version=f"staticfleet {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    from staticfleet.commands import (
        analyze,
        coordinator,
        group,
        members,
        operator,
        operator_acls,
        simulate,
    )

    coordinator.register(subparsers)
    operator.register(subparsers)
    members.register(subparsers)
    group.register(subparsers)
    operator_acls.register(subparsers)
    analyze.register(subparsers)
    simulate.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run: Command | None = getattr(args, "run", None)
    if run is None:
        parser.print_help()
        return 2
    return run(args)


if __name__ == "__main__":
    sys.exit(main())

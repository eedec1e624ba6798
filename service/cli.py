"""The `terminus` command line: one entry point, a subcommand per job (DESIGN section 9)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from events.adapters import PROVIDERS

Handler = Callable[[argparse.Namespace], int]


def _simulate(args: argparse.Namespace) -> int:
    from service.simulate import SimulationError, outcome_json, simulate

    try:
        outcome = simulate(
            [Path(f) for f in args.files],
            provider=args.provider,
            lenient=args.lenient,
            max_attempts=args.max_attempts,
            keep_partial=not args.discard_partial,
        )
    except SimulationError as exc:
        print(f"terminus simulate: {exc}", file=sys.stderr)
        return 1
    sys.stdout.buffer.write(outcome_json(outcome) + b"\n")
    return 0


def _run(args: argparse.Namespace) -> int:
    from service.demo import run_demo

    return run_demo(fixtures=args.fixtures)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="terminus", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser(
        "simulate",
        help="run transcript files as the successive attempts of one turn (no Redis)",
        description="Files: .sse raw provider SSE, .jsonl normalized events or provider "
        "payloads, .json HTTP error {status_code, headers, body} or provider payloads, "
        ".eventstream Bedrock frames. Prints one JSON outcome.",
    )
    sim.add_argument("files", nargs="+", metavar="FILE")
    sim.add_argument("--provider", choices=PROVIDERS)
    sim.add_argument("--lenient", action="store_true", help="accept the lenient terminal proof")
    sim.add_argument("--max-attempts", type=_positive, default=None)
    sim.add_argument("--discard-partial", action="store_true", help="drop, not keep, partials")
    sim.set_defaults(handler=_simulate)
    run = sub.add_parser("run", help="the service with a demo workload")
    run.add_argument("--demo", action="store_true", help="feed the recorded demo transcripts")
    run.add_argument("--fixtures", type=Path, default=None, help="transcripts directory")
    run.set_defaults(handler=_run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except BrokenPipeError:
        # The reader (e.g. `| head`) went away: not an error of ours, and no traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    raise SystemExit(main())

"""The `terminus` command line: one entry point, a subcommand per job (DESIGN section 9)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from terminus.service.cli.archive import add_archive_command
from terminus.service.cli.call import add_call_command
from terminus.service.cli.cancel import add_cancel_command
from terminus.service.cli.common import handler
from terminus.service.cli.contract import add_contract_command
from terminus.service.cli.gateway import DEFAULT_HTTP, add_gateway_commands, host_port
from terminus.service.cli.inspect import add_inspect_command
from terminus.service.cli.lifeline import watch_parent
from terminus.service.cli.providers import add_provider_arguments
from terminus.service.cli.publish import add_publish_command
from terminus.service.cli.read import add_read_commands
from terminus.service.cli.sink import add_sink_command
from terminus.service.cli.traces import add_traces_command

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from terminus.service.settings import Settings

Handler = Callable[[argparse.Namespace], int]


def _simulate(args: argparse.Namespace) -> int:
    from terminus.service.cli.providers import ProviderChoiceError, chosen_provider
    from terminus.service.cli.simulate import SimulationError, outcome_json, simulate

    try:
        outcome = simulate(
            [Path(f) for f in args.files],
            provider=chosen_provider(args),
            lenient=args.lenient,
            max_attempts=args.max_attempts,
            keep_partial=not args.discard_partial,
        )
    except (SimulationError, ProviderChoiceError) as exc:
        print(f"terminus simulate: {exc}", file=sys.stderr)
        return 1
    sys.stdout.buffer.write(outcome_json(outcome) + b"\n")
    return 0


def _run(args: argparse.Namespace) -> int:
    from terminus.service.cli.run import run_service

    http = None if args.no_http else args.http
    return run_service(
        _settings(),
        workers=args.workers,
        demo=args.demo,
        once=args.once,
        http=http,
        embedded=args.embedded,
    )


def _worker(args: argparse.Namespace) -> int:
    from redis.exceptions import ConnectionError, TimeoutError

    settings = _settings()  # before the app's module, which reads them again as it loads
    from terminus.service.cli.loop import run
    from terminus.service.runtime.app import create_app
    from terminus.service.shape import ShapeError

    try:
        run(create_app(settings).run())
    except (ConnectionError, TimeoutError, OSError) as exc:  # Redis away as the worker starts
        raise SystemExit(f"terminus worker: cannot reach Redis: {exc}") from None
    except ShapeError as exc:  # restarting it would not help: the setting must change
        raise SystemExit(f"terminus worker: {exc}") from None
    return 0


async def _replay(redis: Redis, settings: Settings, args: argparse.Namespace) -> int:
    from terminus.service.cli import render
    from terminus.service.cli.replay import replay
    from terminus.service.runtime.archiving import local_archive

    archive = local_archive(settings)
    with render.progress_bar("replaying entries") as progress:
        report = await replay(
            redis,
            settings,
            verify=args.verify,
            target=args.into,
            keep=args.keep,
            progress=progress,
            archive=archive if archive.root.is_dir() else None,
        )
    print(f"replayed {report.entries} entries of {report.partitions} partitions")
    if report.differences:
        first = render.printable(report.differences[0])  # keys and values from the log
        print(f"DIFFERENT ({len(report.differences)}): {first}")
        return 1
    if args.verify:
        print("identical: every projection matches the live one")
    return 0


def _settings() -> Settings:
    from terminus.service.settings import SettingsError, from_env

    try:
        return from_env(os.environ)
    except SettingsError as exc:
        raise SystemExit(f"terminus: {exc}") from None


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
    add_provider_arguments(sim, "the provider the files came from")
    sim.add_argument("--lenient", action="store_true", help="accept the lenient terminal proof")
    sim.add_argument("--max-attempts", type=_positive, default=None)
    sim.add_argument("--discard-partial", action="store_true", help="drop, not keep, partials")
    sim.set_defaults(handler=_simulate)
    run = sub.add_parser(
        "run",
        help="the service: worker pool on Redis (embedded when none is configured)",
        description="Uses REDIS_URL, else a Redis on 127.0.0.1:6379, else starts an embedded "
        "redis-server with AOF under ./var/redis (--embedded: always that, on a free port). "
        "Ctrl-C stops everything cleanly.",
    )
    run.add_argument("--workers", type=_positive, default=2, help="worker processes (default 2)")
    run.add_argument("--demo", action="store_true", help="also play the recorded demo turns")
    run.add_argument("--once", action="store_true", help="with --demo: exit when it is done")
    run.add_argument(
        "--embedded",
        action="store_true",
        help="always start a private embedded Redis, never use REDIS_URL or 127.0.0.1:6379",
    )
    run.add_argument(
        "--http",
        type=host_port,
        default=host_port(DEFAULT_HTTP),
        metavar="HOST:PORT",
        help=f"the HTTP gateway's address (default {DEFAULT_HTTP})",
    )
    run.add_argument("--no-http", action="store_true", help="no HTTP gateway")
    run.set_defaults(handler=_run)
    worker = sub.add_parser(
        "worker", help="one worker process (the FastStream app; same as faststream run)"
    )
    worker.set_defaults(handler=_worker)
    replay = sub.add_parser(
        "replay",
        help="rebuild every projection from the inbound logs under another prefix",
        description="Rebuilds sessions, messages, partials, snapshots, commands, transitions "
        "and dead letters from the logs, each read from TERMINUS_ARCHIVE_DIR (what was "
        "archived) and then from Redis. With --verify, compares them with the live ones and "
        "exits 1 printing the first difference. Run it on a quiet pool. On a terminal, a "
        "progress bar on stderr counts the entries replayed.",
    )
    replay.add_argument("--verify", action="store_true", help="compare with the live keys")
    replay.add_argument("--into", metavar="PREFIX", default=None, help="default <prefix>-replay")
    replay.add_argument("--keep", action="store_true", help="keep the rebuilt keys")
    replay.set_defaults(handler=handler(_replay))
    add_read_commands(sub)
    add_archive_command(sub)
    add_inspect_command(sub)
    add_publish_command(sub)
    add_cancel_command(sub)
    add_call_command(sub)
    add_contract_command(sub)
    add_sink_command(sub)
    add_traces_command(sub)
    add_gateway_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    watch_parent(os.environ)  # a child of `terminus run` ends when it does (cli/lifeline.py)
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

"""`terminus sink`: write the proven messages and the ends of turns into PostgreSQL or SQLite.

`terminus sink migrate --to URL` creates or upgrades the schema (docs/sinks.md). `terminus sink
--to URL` follows this process's share of the partitions until Ctrl-C; with `--once` it writes
every entry committed so far, of each partition no other sink process holds, and exits. A new
database is filled from the archive (`TERMINUS_ARCHIVE_DIR`) and the live logs, as `terminus
replay` reads them, so a database added later holds the whole history.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal

from redis.asyncio import Redis

from terminus.service.cli.common import CommandError, Subparsers, handler
from terminus.service.runtime.archiving import local_archive
from terminus.service.runtime.logs import configure
from terminus.service.runtime.worker import new_worker_id
from terminus.service.settings import Settings
from terminus.service.sinks import SinkError
from terminus.service.sinks.pool import SinkPool
from terminus.service.sinks.target import Target
from terminus.service.sinks.transact import DatabaseAway, check_schema, migrate

DEFAULT_NAME = "default"


def add_sink_command(sub: Subparsers) -> None:
    """Add `sink` to the `terminus` subcommands."""
    sink = sub.add_parser(
        "sink",
        help="write proven messages and turn ends into PostgreSQL or SQLite, exactly once",
        description=__doc__,
    )
    sink.add_argument("action", nargs="?", choices=["migrate"], help="create or upgrade the schema")
    sink.add_argument(
        "--to", required=True, metavar="URL", help="postgresql://USER@HOST/DB or sqlite:///PATH"
    )
    sink.add_argument("--once", action="store_true", help="write what is committed, then exit")
    sink.add_argument(
        "--name",
        default=DEFAULT_NAME,
        help="the sink's name: its own position per partition (default: default)",
    )
    sink.set_defaults(handler=handler(_sink))


async def _sink(redis: Redis, settings: Settings, args: argparse.Namespace) -> int:
    try:
        target = Target(args.to)
        if args.action == "migrate":
            return await _migrate(target)
        return await _follow(redis, settings, target, args)
    except (SinkError, ValueError) as exc:
        raise CommandError(str(exc)) from None


async def _migrate(target: Target) -> int:
    session = target.session()
    try:
        before, after = await migrate(session)
    finally:
        await session.close()
    state = "up to date" if before == after else f"migrated from {before or 'nothing'}"
    print(f"schema version {after} at {target}: {state}")
    return 0


async def _follow(
    redis: Redis, settings: Settings, target: Target, args: argparse.Namespace
) -> int:
    session = target.session()
    try:
        await check_schema(session)
    except DatabaseAway as exc:
        raise CommandError(f"cannot reach the database: {exc}") from None
    finally:
        await session.close()
    # Always the archive, even one not written yet: the workers create it at their first
    # archiving, and a sink that started before must read it once it lags behind the trim.
    pool = SinkPool(redis, settings, target, args.name, new_worker_id(), local_archive(settings))
    if not args.once:
        configure(settings.log_format, logging.INFO)
        # A supervisor's SIGTERM ends the pages in hand and hands the leases back at once.
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, pool.stop)
        await pool.run()
        return 0
    summary = await pool.once()
    t = summary.tally
    print(
        f"sink {args.name}: {t.entries} entries of {len(summary.done)} partitions folded, "
        f"{t.rows} rows written, {t.refused} refused, to {target}"
    )
    if summary.held:
        print(f"skipped partitions another sink holds: {summary.held}")
    return 0

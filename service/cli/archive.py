"""`terminus archive`: archive the final turns of every partition no worker holds, and trim.

Workers with `TERMINUS_RETAIN_MS` > 0 archive the partitions they own by themselves; this command
is for a pool that runs without retention, or is stopped: it takes each free partition's lease
for the pass (so no worker commits meanwhile), archives to `TERMINUS_ARCHIVE_DIR`, and gives the
lease back. Without `--once` it repeats every few seconds until Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio

from redis.asyncio import Redis

from terminus.service.cli.common import Subparsers, handler
from terminus.service.runtime.archiving import archive_free_partitions, local_archive
from terminus.service.settings import Settings

REPEAT_S = 5.0


def add_archive_command(sub: Subparsers) -> None:
    """Add `archive` to the `terminus` subcommands."""
    archive = sub.add_parser(
        "archive",
        help="archive final turns to TERMINUS_ARCHIVE_DIR, release them, trim the logs",
        description=__doc__,
    )
    archive.add_argument("--once", action="store_true", help="one pass, then exit")
    archive.add_argument(
        "--retain-ms",
        type=int,
        default=None,
        metavar="MS",
        help="archive final turns older than this by log time (default TERMINUS_RETAIN_MS, "
        "and with that unset, every final turn)",
    )
    archive.set_defaults(handler=handler(_archive))


async def _archive(redis: Redis, settings: Settings, args: argparse.Namespace) -> int:
    retain_ms = settings.retain_ms if args.retain_ms is None else max(0, args.retain_ms)
    archive = local_archive(settings)
    while True:
        done, skipped = await archive_free_partitions(redis, settings, archive, retain_ms)
        entries = sum(r.archived for r in done.values())
        turns = sum(r.released for r in done.values())
        trimmed = sum(r.trimmed for r in done.values())
        print(
            f"archived {entries} entries ({turns} turns released) to {settings.archive_dir}, "
            f"trimmed {trimmed} from the logs"
        )
        if skipped:
            print(f"skipped partitions held by a worker: {skipped}")
        if args.once:
            return 0
        await asyncio.sleep(REPEAT_S)

"""`terminus traces`: every final turn's spans, folded from the inbound logs and exported.

Each partition's log is read as replay reads it (archive, then live log), folded with the core,
and each turn that is final becomes its span tree (service/traces/), exported over OTLP/HTTP
(protobuf) to where the standard OTEL_EXPORTER_OTLP_* variables say, or printed as JSON lines
with `--json`. With `--once` it exports what the logs hold and exits (a backfill); without, it
goes on every few seconds with what was appended, exporting turns as they end, until Ctrl-C, and
(exporting, not printing) keeps its position in Redis after each pass: started again, it goes on
from there. The same log
gives the same spans, ids included: a second backfill sends the same spans again.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from typing import Final

from redis.asyncio import Redis

from terminus.service import TerminusError
from terminus.service.cli.common import CommandError, Subparsers, handler
from terminus.service.keys import Keys
from terminus.service.runtime.archiving import local_archive
from terminus.service.settings import Settings
from terminus.service.traces import marks
from terminus.service.traces.logs import PartitionTraces
from terminus.service.traces.spans import TurnTrace, encode

REPEAT_S: Final = 2.0
Sink = Callable[[list[TurnTrace]], int]  # takes the traces of a pass, returns spans sent


def add_traces_command(sub: Subparsers) -> None:
    """Add `traces` to the `terminus` subcommands."""
    traces = sub.add_parser(
        "traces",
        help="export every final turn's spans (OTLP/HTTP, OTEL_* variables) from the logs",
        description=__doc__,
    )
    traces.add_argument("--once", action="store_true", help="export what the logs hold, exit")
    traces.add_argument(
        "--json", action="store_true", help="print each turn's span tree as a JSON line instead"
    )
    traces.set_defaults(handler=handler(_traces), follow=True)


async def _traces(redis: Redis, settings: Settings, args: argparse.Namespace) -> int:
    sink, close = _printer() if args.json else _exporter()
    archive = local_archive(settings)
    where = archive if archive.root.is_dir() else None
    partitions = [
        PartitionTraces(redis, Keys(p, settings.prefix), settings.core(), settings.max_event_bytes)
        for p in range(settings.partitions)
    ]
    follow = not args.once and not args.json  # a printout moves no exporter's position
    if follow:
        await _resume(redis, partitions)
    try:
        while True:
            traces = [t for p in partitions for t in await p.read(where)]
            spans = await asyncio.to_thread(sink, traces)
            if args.once or traces:
                print(f"exported {spans} spans of {len(traces)} turns", file=sys.stderr)
            if args.once:
                return 0
            if follow:
                await _save(redis, partitions)
            await asyncio.sleep(REPEAT_S)
    finally:
        close()


async def _resume(redis: Redis, partitions: list[PartitionTraces]) -> None:
    """A follower goes on where the last one stopped (service/traces/marks.py)."""
    for partition in partitions:
        mark = await marks.load(redis, partition.keys)
        if mark is not None:
            partition.resume_from(mark)


async def _save(redis: Redis, partitions: list[PartitionTraces]) -> None:
    """Once a pass is exported: where the next follower resumes."""
    for partition in partitions:
        mark = partition.mark()
        if mark is not None:
            await marks.save(redis, partition.keys, mark)


def _printer() -> tuple[Sink, Callable[[], None]]:
    def sink(traces: list[TurnTrace]) -> int:
        for trace in traces:
            sys.stdout.buffer.write(encode(trace) + b"\n")
        sys.stdout.flush()
        return sum(len(t.spans) for t in traces)

    return sink, lambda: None


def _exporter() -> tuple[Sink, Callable[[], None]]:
    try:
        from terminus.service.traces import otel
    except TerminusError as exc:
        raise CommandError(str(exc)) from None
    exporter, where = otel.otlp_exporter(), otel.resource()

    def sink(traces: list[TurnTrace]) -> int:
        try:
            return otel.export(traces, exporter, where)
        except otel.ExportFailed as exc:
            raise CommandError(str(exc)) from None

    return sink, exporter.shutdown

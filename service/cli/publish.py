"""`terminus publish`: the producer side, transcript files published as attempts of one turn."""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Iterable
from pathlib import Path

import msgspec
from redis.asyncio import Redis

from terminus.events.inbound import InboundEvent
from terminus.service.cli.common import CommandError, Subparsers, handler
from terminus.service.cli.feeding import PreparedAttempt, prepare_attempt, publish_prepared
from terminus.service.cli.providers import (
    ProviderChoiceError,
    add_provider_arguments,
    chosen_provider,
)
from terminus.service.cli.transcripts import TranscriptError
from terminus.service.keys import partition_of
from terminus.service.sdk.producer import Producer
from terminus.service.settings import Settings


def add_publish_command(sub: Subparsers) -> None:
    cmd = sub.add_parser(
        "publish",
        help="publish transcript files as the successive attempts of one turn",
        description="Producer side: publish each FILE (read as `terminus simulate` reads it) "
        "as the next attempt of one turn, through the producer SDK. Workers decide the "
        "outcome; attempts after the turn is final are ignored as late.",
    )
    cmd.add_argument("files", nargs="+", type=Path, metavar="FILE")
    add_provider_arguments(cmd, "provider of raw transcripts")
    cmd.add_argument("--session", required=True, metavar="S", help="session id")
    cmd.add_argument("--turn", metavar="T", help="turn id (default: a new random one)")
    cmd.add_argument("--json", action="store_true", help="print one JSON object")
    cmd.set_defaults(handler=handler(_publish))


class Published(msgspec.Struct, frozen=True, kw_only=True):
    """What `publish --json` prints."""

    session_id: str
    turn_id: str
    partition: int
    entries: int


class _CountingProducer(Producer):
    entries = 0

    async def publish(self, events: Iterable[InboundEvent]) -> list[bytes]:
        ids = await super().publish(events)
        self.entries += len(ids)
        return ids


async def _publish(redis: Redis, settings: Settings, args: argparse.Namespace) -> int:
    turn_id: str = args.turn or uuid.uuid4().hex
    try:
        provider: str = chosen_provider(args) or ""
    except ProviderChoiceError as exc:
        raise CommandError(str(exc)) from None
    # Every file is read before anything is published, so a bad file publishes nothing.
    attempts = [
        _prepare(path, provider, args.session, turn_id, number)
        for number, path in enumerate(args.files, start=1)
    ]
    # A file has no network reads: its events go as simulate makes them, one per provider event.
    producer = _CountingProducer.from_settings(redis, settings, coalesce_reads=False)
    publisher = producer.turn(args.session, turn_id)
    await publisher.start()
    for number, prepared in enumerate(attempts, start=1):
        await publish_prepared(publisher, prepared, provider, attempt=number)
    partition = partition_of(args.session, settings.partitions)
    done = Published(
        session_id=args.session, turn_id=turn_id, partition=partition, entries=producer.entries
    )
    print(msgspec.json.encode(done).decode() if args.json else _published_line(done))
    return 0


def _prepare(path: Path, provider: str, session: str, turn: str, number: int) -> PreparedAttempt:
    try:
        return prepare_attempt(path, provider, session, turn, attempt=number)
    except TranscriptError as exc:
        raise CommandError(str(exc)) from None


def _published_line(done: Published) -> str:
    return (
        f"published {done.entries} entries of turn {done.turn_id} (session {done.session_id}) "
        f"to partition {done.partition}"
    )

"""`terminus messages | updates | dlq | publish`: what a frontend sees, dead letters, a producer.

Each command connects to REDIS_URL, else to the default local URL, where `terminus run` puts its
embedded Redis; TERMINUS_PREFIX and TERMINUS_PARTITIONS pick the deployment. An unreachable Redis,
a bad setting or a bad input file is one line on stderr and exit status 1.

JSON outputs: `messages --json` prints one array; `updates --json` and `dlq list --json` print one
object per line. A dead letter's `raw` is base64 (msgspec's encoding of bytes), so any byte
survives the round trip.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

import msgspec
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from events.adapters import CONTRACTS, PROVIDERS, AttemptContext
from events.inbound import AttemptStarted, InboundEvent
from events.outbound import PersistedMessage, SessionUpdate, TextPart
from service import embedded, views
from service.keys import partition_of
from service.producer import Producer, TurnPublisher
from service.settings import Settings, SettingsError
from service.settings import from_env as settings_from_env
from service.transcripts import TranscriptError, read_attempt

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
Body = Callable[[Redis, Settings, argparse.Namespace], Awaitable[int]]

CURSOR = re.compile(r"\d+(-\d+)?")
_FRAME_IDENTITY = ("sessionUpdate", "session_id", "turn_id", "cursor")


class CommandError(Exception):
    """A user-facing failure; `str()` is the one line printed."""


def add_read_commands(sub: Subparsers) -> None:
    """Add `messages`, `updates`, `dlq` and `publish` to the `terminus` subcommands."""
    _add_messages(sub)
    _add_updates(sub)
    _add_dlq(sub)
    _add_publish(sub)


def _run(body: Body, args: argparse.Namespace) -> int:
    """Run `body` with a client; expected failures become one stderr line and status 1."""
    name = f"terminus {args.command}"
    try:
        settings = settings_from_env(os.environ)
        return asyncio.run(_connected(body, settings, args))
    except (SettingsError, CommandError) as exc:
        print(f"{name}: {exc}", file=sys.stderr)
    except (RedisConnectionError, RedisTimeoutError) as exc:
        print(f"{name}: cannot reach Redis: {_one_line(exc)}", file=sys.stderr)
    except KeyboardInterrupt:
        # Ctrl-C is how `--follow` is meant to end.
        return 0 if getattr(args, "follow", False) else 130
    return 1


async def _connected(body: Body, settings: Settings, args: argparse.Namespace) -> int:
    async with Redis.from_url(settings.redis_url or embedded.LOCAL_URL) as redis:
        return await body(redis, settings, args)


def _handler(body: Body) -> Callable[[argparse.Namespace], int]:
    return lambda args: _run(body, args)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _cursor(text: str) -> str:
    if not CURSOR.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a stream id like 1700000000000-0")
    return text


# messages


def _add_messages(sub: Subparsers) -> None:
    cmd = sub.add_parser(
        "messages",
        help="a session's persisted messages, in commit order",
        description="Print the persisted messages of SESSION: one line each (message id, "
        "finish reason, text), or with --json one JSON array of the full messages.",
    )
    cmd.add_argument("session", metavar="SESSION")
    cmd.add_argument("--json", action="store_true", help="one JSON array of messages")
    cmd.set_defaults(handler=_handler(_messages))


async def _messages(redis: Redis, settings: Settings, args: argparse.Namespace) -> int:
    found = await views.session_messages(
        redis, args.session, partitions=settings.partitions, prefix=settings.prefix
    )
    if args.json:
        print(msgspec.json.encode(found).decode())
        return 0
    if not found:
        print(f"terminus messages: no messages in session {args.session!r}", file=sys.stderr)
    for message in found:
        print(_message_line(message))
    return 0


def _message_line(message: PersistedMessage) -> str:
    text = "".join(p.text for p in message.parts if isinstance(p, TextPart))
    return f"{message.message_id} [{message.finish_reason}] {text}"


# updates


def _add_updates(sub: Subparsers) -> None:
    cmd = sub.add_parser(
        "updates",
        help="a session's update frames, as a frontend reads them",
        description="Print the frames of SESSION after CURSOR (exclusive), one per line, each "
        "with its cursor. --follow keeps printing new frames until Ctrl-C.",
    )
    cmd.add_argument("session", metavar="SESSION")
    cmd.add_argument(
        "--from",
        dest="cursor",
        type=_cursor,
        metavar="CURSOR",
        help="print only frames after this cursor (a stream id)",
    )
    cmd.add_argument("--follow", action="store_true", help="wait for new frames until Ctrl-C")
    cmd.add_argument("--json", action="store_true", help="one JSON frame per line")
    cmd.set_defaults(handler=_handler(_updates))


async def _updates(redis: Redis, settings: Settings, args: argparse.Namespace) -> int:
    session, after = args.session, args.cursor
    partitions, prefix = settings.partitions, settings.prefix
    if args.follow:
        follow = views.follow_updates(
            redis, session, after=after, partitions=partitions, prefix=prefix
        )
        async for frame in follow:
            print(_frame_line(frame, args.json), flush=True)
        return 0
    frames = await views.session_updates(
        redis, session, after=after, partitions=partitions, prefix=prefix
    )
    for frame in frames:
        print(_frame_line(frame, args.json))
    return 0


def _frame_line(frame: SessionUpdate, as_json: bool) -> str:
    """JSON, or `CURSOR TAG turn=T key=value...` with values in JSON."""
    if as_json:
        return msgspec.json.encode(frame).decode()
    fields = msgspec.to_builtins(frame)
    details = " ".join(
        f"{k}={msgspec.json.encode(v).decode()}"
        for k, v in fields.items()
        if k not in _FRAME_IDENTITY
    )
    return f"{frame.cursor} {fields['sessionUpdate']} turn={frame.turn_id} {details}".rstrip()


# dlq


def _add_dlq(sub: Subparsers) -> None:
    dlq = sub.add_parser(
        "dlq",
        help="inspect and requeue dead letters",
        description="Dead letters: inbound entries that could not be applied.",
    )
    verbs = dlq.add_subparsers(dest="dlq_command", required=True)
    listing = verbs.add_parser(
        "list",
        help="one line per dead letter",
        description="One line per dead letter; with --json one JSON object per line, whose "
        "`raw` (the entry's bytes) is base64.",
    )
    listing.add_argument("--partition", type=int, metavar="P", help="only this partition")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    listing.set_defaults(handler=_handler(_dlq_list))
    requeue = verbs.add_parser(
        "requeue",
        help="append dead letters to their source stream again",
        description="Append each chosen dead letter's raw entry to its source stream as a new "
        "entry. The dead letters stay listed: replay re-derives them from the log.",
    )
    requeue.add_argument("--all", action="store_true", help="every dead letter (of --partition)")
    requeue.add_argument("ids", nargs="*", metavar="ID", help="dead letter ids, or --all")
    requeue.add_argument("--partition", type=int, metavar="P", help="only this partition")
    requeue.set_defaults(handler=_handler(_dlq_requeue))


async def _dlq_list(redis: Redis, settings: Settings, args: argparse.Namespace) -> int:
    letters = await _dead_letters(redis, settings, args.partition)
    for letter in letters:
        print(msgspec.json.encode(letter).decode() if args.json else _letter_line(letter))
    return 0


async def _dead_letters(
    redis: Redis, settings: Settings, partition: int | None
) -> list[views.DeadLetter]:
    if partition is not None and not 0 <= partition < settings.partitions:
        raise CommandError(f"--partition {partition} is not in 0..{settings.partitions - 1}")
    return await views.dead_letters(
        redis, partition=partition, partitions=settings.partitions, prefix=settings.prefix
    )


def _letter_line(letter: views.DeadLetter) -> str:
    raw = repr(letter.raw)
    raw = raw if len(raw) <= 80 else raw[:79] + "…"
    return (
        f"partition {letter.partition} {letter.id} <- {letter.source_stream} "
        f"{letter.source_id}: {letter.reason} | raw {raw}"
    )


async def _dlq_requeue(redis: Redis, settings: Settings, args: argparse.Namespace) -> int:
    if args.all == bool(args.ids):
        raise CommandError("name the dead letters to requeue (ID...) or pass --all, not both")
    letters = await _dead_letters(redis, settings, args.partition)
    chosen = letters if args.all else _pick(letters, args.ids)
    ids = await views.requeue(redis, chosen)
    print(f"requeued {len(ids)} dead letter{'' if len(ids) == 1 else 's'}")
    return 0


def _pick(letters: Sequence[views.DeadLetter], ids: Iterable[str]) -> list[views.DeadLetter]:
    """The letters with these ids; an unknown id, or one found in two partitions, is an error."""
    chosen: list[views.DeadLetter] = []
    for wanted in ids:
        found = [letter for letter in letters if letter.id == wanted]
        if not found:
            raise CommandError(f"no dead letter {wanted}")
        if len(found) > 1:
            where = ", ".join(str(letter.partition) for letter in found)
            raise CommandError(f"{wanted} is in partitions {where}; pass --partition")
        chosen.extend(found)
    return chosen


# publish


def _add_publish(sub: Subparsers) -> None:
    cmd = sub.add_parser(
        "publish",
        help="publish transcript files as the successive attempts of one turn",
        description="Producer side: publish each FILE (read as `terminus simulate` reads it) "
        "as the next attempt of one turn, through the producer SDK. Workers decide the "
        "outcome; attempts after the turn is final are ignored as late.",
    )
    cmd.add_argument("files", nargs="+", type=Path, metavar="FILE")
    cmd.add_argument("--provider", choices=PROVIDERS, help="provider of raw transcripts")
    cmd.add_argument("--session", required=True, metavar="S", help="session id")
    cmd.add_argument("--turn", metavar="T", help="turn id (default: a new random one)")
    cmd.add_argument("--json", action="store_true", help="print one JSON object")
    cmd.set_defaults(handler=_handler(_publish))


class Published(msgspec.Struct, frozen=True, kw_only=True):
    """What `publish --json` prints."""

    session_id: str
    turn_id: str
    partition: int
    entries: int


@dataclass(frozen=True)
class _Attempt:
    """One file, ready to publish: raw SSE for the producer's adapter, or decoded events."""

    sse: str | None
    events: list[InboundEvent]
    started: AttemptStarted | None


class _CountingProducer(Producer):
    """A producer that counts the inbound entries it wrote."""

    entries = 0

    async def publish(self, events: Iterable[InboundEvent]) -> list[bytes]:
        ids = await super().publish(events)
        self.entries += len(ids)
        return ids


async def _publish(redis: Redis, settings: Settings, args: argparse.Namespace) -> int:
    turn_id: str = args.turn or uuid.uuid4().hex
    # Every file is read before anything is published, so a bad file publishes nothing.
    attempts = [
        _read(path, number, args.session, turn_id, args.provider)
        for number, path in enumerate(args.files, start=1)
    ]
    producer = _CountingProducer(redis, partitions=settings.partitions, prefix=settings.prefix)
    publisher = producer.turn(args.session, turn_id)
    await publisher.start()
    for number, attempt in enumerate(attempts, start=1):
        await _publish_attempt(publisher, number, attempt, args.provider or "")
    partition = partition_of(args.session, settings.partitions)
    done = Published(
        session_id=args.session, turn_id=turn_id, partition=partition, entries=producer.entries
    )
    print(msgspec.json.encode(done).decode() if args.json else _published_line(done))
    return 0


def _published_line(done: Published) -> str:
    return (
        f"published {done.entries} entries of turn {done.turn_id} (session {done.session_id}) "
        f"to partition {done.partition}"
    )


def _read(path: Path, number: int, session: str, turn: str, provider: str | None) -> _Attempt:
    ctx = AttemptContext(session_id=session, turn_id=turn, attempt=number, provider=provider or "")
    try:
        events = [event for event, _ in read_attempt(path, ctx, provider, 0)]
    except TranscriptError as exc:
        raise CommandError(str(exc)) from None
    if path.suffix.lower() == ".sse":
        return _Attempt(sse=path.read_text(), events=[], started=None)
    first = events[0] if events else None
    if not isinstance(first, AttemptStarted):
        return _Attempt(sse=None, events=events, started=None)
    # The producer derives the contract from the provider; a file that says otherwise cannot
    # be published faithfully.
    if first.contract != CONTRACTS.get(first.provider, "ai-sdk"):
        raise CommandError(
            f"{path}: contract {first.contract!r} does not match provider {first.provider!r}"
        )
    return _Attempt(sse=None, events=events[1:], started=first)


async def _publish_attempt(
    publisher: TurnPublisher, number: int, attempt: _Attempt, provider: str
) -> None:
    started = attempt.started
    if started is None:
        await publisher.start_attempt(attempt=number, provider=provider)
    else:
        await publisher.start_attempt(
            attempt=number,
            provider=started.provider,
            model=started.model,
            strict=started.strict,
            ts_ms=started.ts_ms,
        )
    if attempt.sse is None:
        await publisher.add(attempt.events)
        await publisher.flush()
    else:
        await publisher.feed_sse(attempt.sse)
        await publisher.close_attempt()

"""`terminus messages | updates | dlq`: what a frontend sees, and the dead letters.

Each command connects to REDIS_URL, else to the default local URL, where `terminus run` puts its
embedded Redis; TERMINUS_PREFIX picks the deployment, whose recorded partition count they use
(service/shape.py: TERMINUS_PARTITIONS, if set, must agree with it). An unreachable Redis,
a bad setting or a bad input file is one line on stderr and exit status 1.

JSON outputs: `messages --json` prints one array; `updates --json` and `dlq list --json` print one
object per line. A dead letter's `raw` is base64 (msgspec's encoding of bytes), so any byte
survives the round trip.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterable, Sequence

import msgspec
from redis.asyncio import Redis

from terminus.events.outbound import SessionUpdate
from terminus.service.cli import render
from terminus.service.cli.common import CommandError, Subparsers, handler
from terminus.service.sdk import views
from terminus.service.settings import Settings

CURSOR = re.compile(r"\d+(-\d+)?")


def add_read_commands(sub: Subparsers) -> None:
    """Add `messages`, `updates` and `dlq` to the `terminus` subcommands."""
    _add_messages(sub)
    _add_updates(sub)
    _add_dlq(sub)


def _cursor(text: str) -> str:
    if not CURSOR.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a stream id like 1700000000000-0")
    return text


# messages


def _add_messages(sub: Subparsers) -> None:
    cmd = sub.add_parser(
        "messages",
        help="a session's persisted messages, in commit order",
        description="Print the persisted messages of SESSION: a table each (identity, "
        "provider/model, finish reason, usage, one row per part with text previews and tool "
        "calls), or with --json one JSON array of the full messages.",
    )
    cmd.add_argument("session", metavar="SESSION")
    cmd.add_argument("--json", action="store_true", help="one JSON array of messages")
    cmd.set_defaults(handler=handler(_messages))


async def _messages(redis: Redis, settings: Settings, args: argparse.Namespace) -> int:
    found = await views.session_messages(
        redis, args.session, partitions=settings.partitions, prefix=settings.prefix
    )
    if args.json:
        print(msgspec.json.encode(found).decode())
        return 0
    if not found:
        print(f"terminus messages: no messages in session {args.session!r}", file=sys.stderr)
    out = render.console()
    for message in found:
        out.print(render.message_view(message))
    return 0


# updates


def _add_updates(sub: Subparsers) -> None:
    cmd = sub.add_parser(
        "updates",
        help="a session's update frames, as a frontend reads them",
        description="Print the frames of SESSION after CURSOR (exclusive), one per line: "
        "cursor, kind, turn, step.attempt, then the delta or the key fields. --follow keeps "
        "printing each new frame as it is committed until Ctrl-C.",
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
    cmd.set_defaults(handler=handler(_updates))


async def _updates(redis: Redis, settings: Settings, args: argparse.Namespace) -> int:
    session, after = args.session, args.cursor
    partitions, prefix = settings.partitions, settings.prefix
    show = _frame_printer(args.json)
    if args.follow:
        follow = views.follow_updates(
            redis, session, after=after, partitions=partitions, prefix=prefix
        )
        async for frame in follow:
            show(frame)  # each frame as it comes: a follow must never sit on what it has read
        return 0
    frames = await views.session_updates(
        redis, session, after=after, partitions=partitions, prefix=prefix
    )
    for frame in frames:
        show(frame)
    return 0


def _frame_printer(as_json: bool) -> Callable[[SessionUpdate], None]:
    """Print one frame: its JSON, or `render.frame_line` kept on one line whatever its width."""
    if as_json:
        return lambda frame: print(msgspec.json.encode(frame).decode(), flush=True)
    out = render.console()
    return lambda frame: out.print(render.frame_line(frame), soft_wrap=True)


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
    listing.set_defaults(handler=handler(_dlq_list))
    requeue = verbs.add_parser(
        "requeue",
        help="append dead letters to their source stream again",
        description="Append each chosen dead letter's raw entry to its source stream as a new "
        "entry. The dead letters stay listed: replay re-derives them from the log.",
    )
    requeue.add_argument("--all", action="store_true", help="every dead letter (of --partition)")
    requeue.add_argument("ids", nargs="*", metavar="ID", help="dead letter ids, or --all")
    requeue.add_argument("--partition", type=int, metavar="P", help="only this partition")
    requeue.set_defaults(handler=handler(_dlq_requeue))


async def _dlq_list(redis: Redis, settings: Settings, args: argparse.Namespace) -> int:
    letters = await _dead_letters(redis, settings, args.partition)
    for letter in letters:
        shown = msgspec.json.encode(letter).decode() if args.json else _letter_line(letter)
        print(render.printable(shown))
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

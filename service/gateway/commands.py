"""A turn's producer commands as Server-Sent Events: what an HTTP producer must act on.

One SSE event per command of the session's turn read from its partition's commands stream
(docs/producers.md, "The commands stream"): `id:` the entry id (resume from it with
`Last-Event-ID` or `?from=`), `event:` the command's `type`, `data:` its JSON (re-encoded on
one line). A stream starts after `from` (the `commands_from` of an attempt's answer, noted before
anything of the attempt was published, so no decision about it is missed), or at the stream's
end without one; it ends after the turn's `turn_concluded` or `turn_refused`, or after its first
command with `?until_decision=1`. Commands of other turns, and of another session's turn of the
same id, are never sent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Final

import msgspec
from redis.asyncio import Redis

from terminus.events.codec import decode_command, encode_json
from terminus.events.outbound import ProducerCommand, TurnConcluded, TurnRefused
from terminus.service.keys import FIELD
from terminus.service.redis.replies import last_id, xread

READ_COUNT: Final = 128
BLOCK_MS: Final = 1_000


async def turn_commands(
    redis: Redis, key: str, session_id: str, turn_id: str, after: str | None, first_only: bool
) -> AsyncIterator[bytes]:
    """The SSE events of the turn's commands on stream `key`, after the entry `after`."""
    cursor = after if after is not None else await last_id(redis, key)
    while True:
        reply = await xread(redis, {key: cursor}, READ_COUNT, BLOCK_MS)
        for _, entries in reply:
            for entry_id, fields in entries:
                cursor = entry_id.decode()
                raw = fields.get(FIELD, b"")
                command = _command_of(raw, session_id, turn_id)
                if command is None:
                    continue
                yield _sse(cursor, command)
                if first_only or isinstance(command, TurnConcluded | TurnRefused):
                    return


def _command_of(raw: bytes, session_id: str, turn_id: str) -> ProducerCommand | None:
    """The entry's command if it is about this turn; None for any other entry."""
    try:
        command = decode_command(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None  # not a command: the stream is the workers', but input is hostile
    if command.session_id != session_id or command.turn_id != turn_id:
        return None
    return command


def _sse(entry_id: str, command: ProducerCommand) -> bytes:
    tag = command.__struct_config__.tag
    return b"id: %s\nevent: %s\ndata: %s\n\n" % (
        entry_id.encode(),
        str(tag).encode(),
        encode_json(command),
    )

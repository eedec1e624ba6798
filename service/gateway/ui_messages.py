"""What the UI message stream routes send: one turn's frames through `UiStream`, as SSE.

    GET /v1/sessions/{id}/turns/{turn}/ui-message-stream   the turn, from `start`
    GET /v1/sessions/{id}/ui-message-stream                the session's open turn (204: none)

Every answer replays the turn from `start`: the AI SDK's resume (`useChat({resume: true})`)
starts from an empty message and keeps what it is sent. The frames kept in the session stream
are read in one batch, so a resume never shows an attempt they already discard; then the live
frames follow from the last one's cursor, until the turn's end, `data: [DONE]`.
`?mode=hold` (the default) is safe for every client; `?mode=reset` sends `reset-step`, which
only ai >= 7.0.70 reads: asking for it is the client's declaration that it does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Final

from redis.asyncio import Redis

from terminus.events.outbound import TURN_ENDINGS, SessionUpdate
from terminus.service.frontends.chunks import Chunk, encode
from terminus.service.frontends.ui_stream import MODES, Mode, UiStream
from terminus.service.gateway.hub import Hub, SubscriberTooSlow, SubscriptionBroken
from terminus.service.gateway.timeline import TurnArchived, load_turn
from terminus.service.keys import keys_for_session
from terminus.service.redis.replies import xrange, xrevrange
from terminus.service.sdk.views import frame_of
from terminus.service.settings import Settings
from terminus.statemachines.states import FINAL_STATES

HEADERS: Final = {"x-vercel-ai-ui-message-stream": "v1"}
DONE: Final = b"data: [DONE]\n\n"
GONE: Final = "the turn's frames are no longer kept; read its message from /messages"


class UiStreamRefused(Exception):
    """The request names no stream it can have: the status and the reason to answer."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


def mode_of(asked: str | None) -> Mode:
    """The delivery mode a request asks for; `hold` unless it says `reset`."""
    for mode in MODES:
        if (asked or "hold") == mode:
            return mode
    raise UiStreamRefused(400, f"mode must be one of {', '.join(MODES)}, not {asked!r}")


def sse(chunks: Sequence[Chunk]) -> bytes:
    return b"".join(b"data: " + encode(chunk) + b"\n\n" for chunk in chunks)


class TurnFrames:
    """A session's frames as the routes need them: kept ones at once, then live ones."""

    def __init__(self, hub: Hub, redis: Redis, settings: Settings, session: str) -> None:
        self.hub, self.redis, self.settings, self.session = hub, redis, settings, session
        self.key = keys_for_session(session, settings.partitions, settings.prefix).session(session)

    async def open_turn(self) -> str | None:
        """The turn of the session's last frame, unless that frame ended it."""
        last = await xrevrange(self.redis, self.key, count=1)
        if not last:
            return None
        frame = frame_of(last[0])
        return None if isinstance(frame, TURN_ENDINGS) else frame.turn_id

    async def ended(self, turn_id: str) -> bool:
        """Whether the turn is over (then nothing live is waited for)."""
        settings = self.settings
        try:
            turn = await load_turn(
                self.redis, self.session, turn_id, settings.partitions, settings.prefix
            )
        except TurnArchived:
            return True
        return turn is not None and turn.state in FINAL_STATES

    async def kept(self) -> list[SessionUpdate]:
        return [frame_of(entry) for entry in await xrange(self.redis, self.key)]

    async def live(self, after: str | None) -> AsyncIterator[list[SessionUpdate]]:
        """The frames after `after`, batch by batch, until the client goes or is cut off (it
        resumes from `start`, as every request does)."""
        try:
            async for batch in self.hub.subscribe_batches(self.session, after):
                yield [delivery.frame for delivery in batch]
        except (SubscriberTooSlow, SubscriptionBroken):
            return


async def ui_message_stream(
    frames: TurnFrames, turn_id: str, mode: Mode, kept: list[SessionUpdate], ended: bool
) -> AsyncIterator[bytes]:
    """The turn as SSE `data:` lines from `start`, ending with `data: [DONE]` at its end."""
    stream = UiStream(frames.session, turn_id, mode)
    yield sse(stream.opening() + stream.apply_all(kept))
    if not (ended or stream.ended):
        async for batch in frames.live(kept[-1].cursor if kept else None):
            chunks = stream.apply_all(batch)
            if chunks:
                yield sse(chunks)
            if stream.ended:
                break
    if stream.ended or ended:
        yield DONE


async def turn_stream(frames: TurnFrames, turn_id: str, mode: Mode) -> AsyncIterator[bytes]:
    """The named turn's stream; refused when it is over and its frames are gone."""
    ended = await frames.ended(turn_id)
    kept = await frames.kept()
    if ended and not any(frame.turn_id == turn_id for frame in kept):
        raise UiStreamRefused(404, GONE)
    return ui_message_stream(frames, turn_id, mode, kept, ended)

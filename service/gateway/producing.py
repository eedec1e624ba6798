"""Producers over HTTP: a producer that cannot reach Redis (a Node backend, a browser-side
proxy) streams each attempt's raw provider response to the gateway, which runs the same adapter
and publishes through the same `TurnPublisher` as the Python SDK (DESIGN section 7).

    POST /v1/sessions/{id}/turns/{turn}/attempts   one attempt (service/gateway/attempts.py);
                                                   the turn's first also starts the turn
    POST /v1/sessions/{id}/turns/{turn}/events     JSON: tool results and errors, turn-ended
    GET  /v1/sessions/{id}/turns/{turn}/commands   the workers' decisions, as SSE
                                                   (service/gateway/commands.py)

Order of work, and why: the token first (a producer token of this very session: it publishes
there and reads nothing else), then its rate, then the form, then the turn's snapshot, then the
publishing. Each refusal comes before anything is published: a turn id that names another
session's turn (or an archived one) is 409, an attempt out of order 409, a next attempt or an
event of a turn the workers have not seen 404. The gateway decides this from the workers'
snapshot, so it needs no state of its own (any number of gateways serve one turn); a turn's
second attempt is POSTed after the decision that asks for it, by which time the snapshot shows
the first. Two producers that start one turn id at the same instant both pass this check: the
workers then refuse the second's entries (dead letters, and `turn_refused` on its commands).

The attempt's answer (200) comes once the attempt is published, with `commands_from`: the
commands stream's position noted before its first event, where the decision about it is read.
"""

from __future__ import annotations

import math
import re
from collections.abc import AsyncIterator, Callable
from typing import Any, Final

import msgspec
from redis.asyncio import Redis
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import Scope

from terminus.events.codec import EventTooLarge
from terminus.service.fold.releases import TOMBSTONE
from terminus.service.fold.snapshots import SnapshotError, TailLedger
from terminus.service.gateway.attempts import AttemptForm, FormError, attempt_form, publish_body
from terminus.service.gateway.commands import turn_commands
from terminus.service.gateway.cursors import BadCursor, parse_cursor
from terminus.service.gateway.tokens import Grant
from terminus.service.gateway.turn_events import BadEvents, publish_events, read_events
from terminus.service.keys import keys_for_session
from terminus.service.redis.replies import last_id, mget
from terminus.service.sdk.attempts import AttemptOrderError
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.publisher import TurnPublisher
from terminus.service.settings import Settings
from terminus.statemachines.states import FINAL_STATES
from terminus.statemachines.turn import Turn

TURN_PATH: Final = "/v1/sessions/{session_id}/turns/{turn_id}"
FOREIGN: Final = "this turn id is not a turn of this session"
Endpoint = Callable[[Request], Any]
GrantOf = Callable[[Request], tuple[str, Grant]]
Deny = Callable[..., Exception]
HoldStream = Callable[[str, AsyncIterator[bytes]], Response]


_BODY_ROUTE: Final = re.compile(r"/v1/sessions/[^/]+/turns/[^/]+/(attempts|events)")


def reads_body(scope: Scope) -> bool:
    """Whether the request is one of the producer routes that read a body (bounded there)."""
    return (
        scope.get("method") == "POST" and _BODY_ROUTE.fullmatch(scope.get("path", "")) is not None
    )


class ProducerRate(msgspec.Struct, frozen=True, kw_only=True):
    """Requests one producer token may make: `burst` at once, refilled at `per_s` a second."""

    per_s: float = 20.0
    burst: int = 40


class Buckets:
    """A token bucket per producer token (in memory: per gateway process)."""

    def __init__(self, rate: ProducerRate, clock: Callable[[], float]) -> None:
        self.rate, self.clock = rate, clock
        self.levels: dict[str, tuple[float, float]] = {}  # token -> (level, at)

    def wait_s(self, token: str) -> float:
        """0 if `token` may make a request now (one is taken), else the seconds until it may."""
        now = self.clock()
        level, at = self.levels.get(token, (float(self.rate.burst), now))
        level = min(float(self.rate.burst), level + (now - at) * self.rate.per_s)
        if level < 1:
            self.levels[token] = (level, now)
            return (1 - level) / self.rate.per_s
        self.levels[token] = (level - 1, now)
        if len(self.levels) > 10_000:  # forget full buckets rather than grow without bound
            full = [
                t
                for t, (lv, a) in self.levels.items()
                if lv + (now - a) * self.rate.per_s >= self.rate.burst
            ]
            for old in full:
                del self.levels[old]
        return 0.0


class ProducerRoutes:
    """The producer routes over `redis`; `grant_of` checks tokens, `deny` refuses."""

    def __init__(
        self,
        redis: Redis,
        settings: Settings,
        grant_of: GrantOf,
        deny: Deny,
        hold: HoldStream,
        buckets: Buckets,
    ) -> None:
        self.redis, self.settings, self.grant_of, self.deny = redis, settings, grant_of, deny
        self.hold, self.buckets = hold, buckets
        # The gateway serves settings already settled with the deployment's shape
        # (service/shape.py), so its count is given: routing a turn needs no ready() first.
        given = msgspec.structs.replace(settings, partitions_given=True)
        self.producer = Producer.from_settings(redis, given, coalesce_reads=settings.coalesce_reads)

    def routes(self, guard: Callable[[Endpoint], Endpoint]) -> list[BaseRoute]:
        return [
            Route(TURN_PATH + "/attempts", guard(self.attempt), methods=["POST"]),
            Route(TURN_PATH + "/events", guard(self.events), methods=["POST"]),
            Route(TURN_PATH + "/commands", guard(self.commands), methods=["GET"]),
        ]

    def authorized(self, request: Request) -> tuple[str, str, str]:
        """(token, session, turn) for a producer token of this session within its rate."""
        token, grant = self.grant_of(request)
        session: str = request.path_params["session_id"]
        if not grant.producer:
            raise self.deny(403, "a producer token is required (terminus token --producer)")
        if grant.session != session:
            raise self.deny(403, "token is not for this session")
        wait = self.buckets.wait_s(token)
        if wait > 0:
            headers = {"Retry-After": str(max(1, math.ceil(wait)))}
            raise self.deny(429, "too many requests for this producer token", headers)
        return token, session, request.path_params["turn_id"]

    async def attempt(self, request: Request) -> Response:
        _, session, turn_id = self.authorized(request)
        try:
            form = attempt_form(request.headers)
        except FormError as exc:
            raise self.deny(400, str(exc)) from None
        turn = await self.snapshot(session, turn_id)
        commands_from = await last_id(self.redis, self.producer.keys(session).commands)
        publisher = self.producer.turn(session, turn_id)
        await self._open(publisher, turn, form)
        try:
            await publish_body(publisher, form, request.stream(), ClientDisconnect)
        finally:
            await publisher.close_attempt()
        body = {
            "session_id": session,
            "turn_id": turn_id,
            "step": publisher.step,
            "attempt": publisher.attempt,
            "next_seq": publisher.seqs.next,
            "commands_from": commands_from,
        }
        return JSONResponse(body)

    async def _open(self, publisher: TurnPublisher, turn: Turn | None, form: AttemptForm) -> None:
        """Start the turn (its first attempt) or go on from the snapshot, then the attempt."""
        first = (form.step or 1, form.attempt or 1) == (1, 1)
        if turn is None and not first:
            raise self.deny(404, "no such turn in this session yet: start it with attempt 1")
        if turn is not None:
            if turn.state in FINAL_STATES:
                raise self.deny(409, f"the turn has ended ({turn.state.value})")
            publisher.resume(turn.step, turn.attempt, turn.last_seq + 1)
        try:
            if turn is None:
                await publisher.start(form.max_attempts)
            await publisher.start_attempt(
                step=form.step, attempt=form.attempt, provider=form.provider, model=form.model
            )
        except AttemptOrderError as exc:
            raise self.deny(409, str(exc)) from None

    async def events(self, request: Request) -> Response:
        _, session, turn_id = self.authorized(request)
        try:
            events = await read_events(request.stream())
        except BadEvents as exc:
            raise self.deny(400, str(exc)) from None
        except ClientDisconnect:
            raise self.deny(400, "the body was cut") from None
        turn = await self.snapshot(session, turn_id)
        if turn is None:
            raise self.deny(404, "no such turn in this session")
        if turn.state in FINAL_STATES:
            raise self.deny(409, f"the turn has ended ({turn.state.value})")
        publisher = self.producer.turn(session, turn_id)
        publisher.resume(turn.step, turn.attempt, max(turn.last_seq + 1, events.next_seq))
        try:
            await publish_events(publisher, events)
        except EventTooLarge as exc:
            raise self.deny(413, str(exc)) from None
        return JSONResponse({"published": len(events.events), "next_seq": publisher.seqs.next})

    async def commands(self, request: Request) -> Response:
        token, session, turn_id = self.authorized(request)
        after = request.headers.get("last-event-id") or request.query_params.get("from")
        if after is not None:
            try:
                after = parse_cursor(after)
            except BadCursor as exc:
                raise self.deny(400, str(exc)) from None
        first_only = request.query_params.get("until_decision") in ("1", "true")
        key = self.producer.keys(session).commands
        await self.redis.ping()  # a stream's status goes out before its first read
        frames = turn_commands(self.redis, key, session, turn_id, after, first_only)
        return self.hold(token, frames)

    async def snapshot(self, session: str, turn_id: str) -> Turn | None:
        """The session's turn as the workers last committed it, None if they have none; 409 if
        the id names another session's turn or an archived one."""
        keys = keys_for_session(session, self.settings.partitions, self.settings.prefix)
        base, tail = await mget(self.redis, [keys.turn(turn_id), keys.tail(turn_id)])
        if base is None:
            return None
        if base == TOMBSTONE:
            raise self.deny(409, "the turn has ended (archived)")
        try:
            turn = TailLedger().load(base, tail)
        except (msgspec.MsgspecError, SnapshotError):
            raise self.deny(500, "unreadable snapshot") from None
        if turn.session_id != session:
            raise self.deny(409, FOREIGN)
        return turn

"""The HTTP gateway: what frontends read, over HTTP and Server-Sent Events (DESIGN sections 4, 7).

    GET /v1/sessions/{id}/updates    one SSE event per session frame: `id:` is the frame's cursor,
                                     `event:` its kind, `data:` its JSON as the worker stored it.
                                     Resume with `Last-Event-ID` (or `?from=`): every later frame,
                                     none twice. `?until_end=1` ends the stream after the first
                                     `turn_finished` or `agent_error`; `?until_turn=T` after
                                     turn T's (service/gateway/follow.py). Comment pings
                                     keep proxies from closing an idle stream.
    GET /v1/sessions/{id}/messages   persisted messages in commit order, `?offset=&limit=`
    GET /v1/turns/{id}               a turn's state, attempts and current position
    POST /v1/sessions/{id}/turns/{turn}/cancel   cancel a live turn (202; 404 unknown, 409 ended;
                                     `?reason=`); a session token of that session or an operator
                                     token (service/gateway/cancel.py)
    GET /healthz                     200 when Redis answers
    GET /metrics                     Prometheus text (operator token)
    /inspect, /v1/admin/turns, /v1/turns/{id}/timeline   the inspector (gateway/inspector.py)

Access: every session endpoint needs a token for that session (`service/gateway/tokens.py`), as
`Authorization: Bearer ...` (the primary way), the cookie of `POST /v1/session-cookie`
(`service/gateway/sign_in.py`, what the inspector uses) or `?token=` (a browser's EventSource cannot
send headers; the access log masks it, and every response says `Referrer-Policy: no-referrer`).
The cookie and the query token authorise GET requests only. No token or a bad one: 401; a valid
token for another session, or an operator token on a session endpoint: 403. `/v1/turns/{id}`
also takes an operator token with `?session=`. Request bodies are refused
unread (413, service/gateway/bodies.py; heads are bounded by service/gateway/heads.py), each
token may open at most `stream_opens` update streams per `stream_window_s` and hold at
most `max_streams` open at once (`TERMINUS_MAX_STREAMS_PER_TOKEN`; 429 with `Retry-After`), so a
misbehaving or leaked client can neither make the gateway hammer Redis nor hold every connection.

While Redis cannot be reached, a route that reads it answers 503 with `Retry-After: 1` (and
`/healthz` 503), never a 500. A command Redis refuses the gateway's ACL user (NOPERM) is 503 too,
with `Retry-After: 30`, and one log line names what to grant (service/redis/acl.py).

`create_gateway` returns a Starlette app; mount it in a FastAPI or Starlette application, or serve
it alone (`terminus gateway`, `terminus run --http`).
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any, Final

import msgspec
from redis.asyncio import Redis
from redis.exceptions import ResponseError
from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from terminus.events.codec import encode_json
from terminus.service.fold.snapshots import SnapshotError
from terminus.service.gateway.bodies import BodyBound
from terminus.service.gateway.cancel import request_cancel
from terminus.service.gateway.cors import cors
from terminus.service.gateway.cursors import BadCursor, parse_cursor
from terminus.service.gateway.follow import session_events
from terminus.service.gateway.hub import Hub
from terminus.service.gateway.inspector import NO_TURN, Inspector, archived_answer
from terminus.service.gateway.params import BadParam, non_negative
from terminus.service.gateway.sign_in import COOKIE, NoReferrer, cookie_header
from terminus.service.gateway.timeline import TurnArchived, load_turn
from terminus.service.gateway.tokens import Grant, Keyring, TokenError, verify
from terminus.service.metrics.exposition import render_metrics
from terminus.service.redis.acl import Alarm, refusal, user_of
from terminus.service.redis.connect import TRANSIENT, url_of
from terminus.service.sdk.views import session_messages
from terminus.service.settings import Settings

PING_S: Final = 15
MAX_LIMIT: Final = 500
PROMETHEUS_TEXT: Final = "text/plain; version=0.0.4; charset=utf-8"
RETRY_AFTER_S: Final = 1
ACL_RETRY_AFTER_S: Final = 30  # an operator has to act: retrying every second does not help


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """Bounds on what one client can ask of the gateway."""

    stream_opens: int = 20  # update streams one token may open per window
    stream_window_s: float = 10.0
    max_streams: int = 8  # update streams one token may hold open at once
    max_body_bytes: int = 0  # no route reads a body (service/gateway/bodies.py)


class _Denied(Exception):
    def __init__(self, status: int, reason: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(reason)
        self.status, self.reason, self.headers = status, reason, headers or {}


class _OpenStreams:
    """Update streams held open per token (per gateway process): one leaked or buggy client
    cannot hold every connection."""

    def __init__(self, limits: Limits) -> None:
        self.cap = limits.max_streams
        self.held: dict[str, int] = {}

    def hold(self, token: str) -> Callable[[], None]:
        """Count one more stream of `token`, or refuse it; returns the release."""
        if self.held.get(token, 0) >= self.cap:
            reason = f"this token already holds {self.cap} open update streams; close one first"
            raise _Denied(429, reason, {"Retry-After": str(RETRY_AFTER_S)})
        self.held[token] = self.held.get(token, 0) + 1
        return lambda: self._release(token)

    def _release(self, token: str) -> None:
        left = self.held.pop(token, 1) - 1
        if left > 0:
            self.held[token] = left


class _HeldStream(EventSourceResponse):
    """An SSE response that releases its slot when it ends, however it ends: Starlette always
    calls the response it was handed, and this runs the release after it."""

    def __init__(self, frames: AsyncIterator[bytes], release: Callable[[], None]) -> None:
        super().__init__(frames, ping=PING_S, send_timeout=30)
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


class _OpenRate:
    """Stream opens per token in a sliding window (in memory: per gateway process)."""

    def __init__(self, limits: Limits, clock: Callable[[], float]) -> None:
        self.limits, self.clock = limits, clock
        self.opens: dict[str, deque[float]] = {}

    def admit(self, token: str) -> None:
        now, window = self.clock(), self.limits.stream_window_s
        recent = self.opens.setdefault(token, deque())
        while recent and recent[0] <= now - window:
            recent.popleft()
        if len(recent) >= self.limits.stream_opens:
            wait = max(1, int(recent[0] + window - now) + 1)
            raise _Denied(429, "too many stream opens", {"Retry-After": str(wait)})
        recent.append(now)
        if len(self.opens) > 10_000:  # forget idle tokens rather than grow without bound
            for old in [t for t, q in self.opens.items() if not q or q[-1] <= now - window]:
                del self.opens[old]


def create_gateway(
    redis: Redis,
    settings: Settings,
    secret: bytes | Keyring,
    limits: Limits | None = None,
    clock: Callable[[], float] = time.time,
) -> Starlette:
    """The gateway's ASGI app over `redis`, checking tokens against `secret` (one key, or a
    `Keyring` of the current and the still-accepted keys)."""
    hub = Hub(redis, settings.partitions, settings.prefix)
    limits = limits or Limits(max_streams=settings.max_streams_per_token)
    h = _Handlers(redis, settings, secret, limits, clock, hub)
    inspector = Inspector(redis, settings, h.grant_of, _Denied)
    guarded = _Guard(Alarm(user_of(url_of(settings))))
    routes = [
        Route("/v1/sessions/{session_id}/updates", guarded(h.updates)),
        Route("/v1/sessions/{session_id}/messages", guarded(h.messages)),
        Route("/v1/turns/{turn_id}", guarded(h.turn)),
        Route(
            "/v1/sessions/{session_id}/turns/{turn_id}/cancel",
            guarded(h.cancel),
            methods=["POST"],
        ),
        Route("/healthz", h.healthz),
        Route("/metrics", guarded(h.metrics)),
        Route("/v1/session-cookie", guarded(h.sign_in), methods=["POST"]),
        Route("/v1/session-cookie", h.sign_out, methods=["DELETE"]),
        Route("/v1/session-cookie", guarded(h.signed_in), methods=["GET"]),
        *inspector.routes(guarded),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await hub.close()

    middleware = [Middleware(NoReferrer), Middleware(BodyBound, limits.max_body_bytes)]
    if settings.cors_origins:
        middleware.append(cors(settings.cors_origins))
    return Starlette(routes=routes, lifespan=lifespan, middleware=middleware)


class _Handlers:
    def __init__(
        self,
        redis: Redis,
        settings: Settings,
        secret: bytes | Keyring,
        limits: Limits,
        clock: Callable[[], float],
        hub: Hub,
    ) -> None:
        self.redis, self.settings, self.hub = redis, settings, hub
        self.secret = Keyring.of(secret)  # validated once, not per request
        self.limits, self.clock = limits, clock
        self.rate = _OpenRate(limits, clock)
        self.streams = _OpenStreams(limits)

    def grant_of(self, request: Request) -> tuple[str, Grant]:
        token = _bearer(request)
        if request.method == "GET":  # the cookie and the query only ever authorise reads
            token = (
                token or request.cookies.get(COOKIE, "") or request.query_params.get("token", "")
            )
        if not token:
            raise _Denied(401, "token required")
        try:
            return token, verify(self.secret, token, self.clock())
        except TokenError as exc:
            raise _Denied(401, str(exc)) from None

    def session_grant(self, request: Request) -> tuple[str, str]:
        token, grant = self.grant_of(request)
        session: str = request.path_params["session_id"]
        if grant.session != session:
            raise _Denied(403, "token is not for this session")
        return token, session

    async def updates(self, request: Request) -> Response:
        token, session = self.session_grant(request)
        after = request.headers.get("last-event-id") or request.query_params.get("from")
        if after is not None:
            try:
                after = parse_cursor(after)
            except BadCursor as exc:
                raise _Denied(400, str(exc)) from None
        # A stream's status goes out before its first read: ask Redis first, so that while it
        # is away /updates answers 503 like every other route, not 200 and a silent stream.
        await self.hub.answering()
        release = self.streams.hold(token)  # a refused request opens no stream
        try:
            self.rate.admit(token)
        except _Denied:
            release()
            raise
        until_end = request.query_params.get("until_end") in ("1", "true")
        until_turn = request.query_params.get("until_turn") or None
        events = session_events(
            self.hub, self.redis, self.settings, session, after, until_end, until_turn
        )
        return _HeldStream(events, release)

    async def messages(self, request: Request) -> Response:
        _, session = self.session_grant(request)
        offset = _int_param(request, "offset", 0)
        limit = min(_int_param(request, "limit", 100), MAX_LIMIT)
        settings = self.settings
        found = await session_messages(
            self.redis, session, partitions=settings.partitions, prefix=settings.prefix
        )
        page = found[offset : offset + limit]
        following = offset + limit if offset + limit < len(found) else None
        body = {"messages": page, "next_offset": following, "total": len(found)}
        return Response(msgspec.json.encode(body), media_type="application/json")

    async def turn(self, request: Request) -> Response:
        _, grant = self.grant_of(request)
        session = grant.session or request.query_params.get("session")
        if session is None:
            raise _Denied(400, "an operator token needs ?session=")
        settings = self.settings
        turn_id = request.path_params["turn_id"]
        try:
            found = await load_turn(
                self.redis, session, turn_id, settings.partitions, settings.prefix
            )
        except (msgspec.MsgspecError, SnapshotError):
            raise _Denied(500, "unreadable snapshot") from None
        except TurnArchived:
            raise _Denied(*archived_answer(grant)) from None
        if found is None:
            raise _Denied(404, NO_TURN)
        return Response(encode_json(found), media_type="application/json")

    async def cancel(self, request: Request) -> Response:
        """A session's own token, or an operator's, may cancel one of its live turns."""
        _, grant = self.grant_of(request)
        session: str = request.path_params["session_id"]
        if not grant.admin and grant.session != session:
            raise _Denied(403, "token is not for this session")
        reason = request.query_params.get("reason", "")
        answer = await request_cancel(
            self.redis, self.settings, session, request.path_params["turn_id"], reason
        )
        return JSONResponse(answer.body, status_code=answer.status)

    async def metrics(self, request: Request) -> Response:
        _, grant = self.grant_of(request)
        if not grant.admin:
            raise _Denied(403, "an operator token is required")
        body = await render_metrics(self.redis, self.settings)
        return Response(body, headers={"Content-Type": PROMETHEUS_TEXT})

    async def sign_in(self, request: Request) -> Response:
        """Set the session cookie from a Bearer token (never from the query or a cookie)."""
        token, grant = self.grant_of(request)
        max_age = int(grant.expires - self.clock())
        secure = request.url.scheme == "https"
        cookie = cookie_header(token, max_age, secure)
        return Response(
            status_code=204, headers={"Set-Cookie": cookie, "Cache-Control": "no-store"}
        )

    async def signed_in(self, request: Request) -> Response:
        """Whether the cookie signs this browser in, and as whom: 200 either way, so that a page
        can ask before its first call (the cookie is HttpOnly: script cannot read it)."""
        try:
            token = request.cookies.get(COOKIE, "")
            grant = verify(self.secret, token, self.clock()) if token else None
        except TokenError:
            grant = None
        if grant is None:
            return JSONResponse({"signed_in": False})
        body = {"signed_in": True, "admin": grant.admin, "expires": grant.expires}
        return JSONResponse(body, headers={"Cache-Control": "no-store"})

    async def sign_out(self, request: Request) -> Response:
        cookie = cookie_header("", 0, request.url.scheme == "https")
        return Response(status_code=204, headers={"Set-Cookie": cookie})

    async def healthz(self, request: Request) -> Response:
        try:
            await self.redis.ping()
        except Exception as exc:  # any failure to answer is "unhealthy", with its reason
            return JSONResponse({"ok": False, "redis": repr(exc)}, status_code=503)
        return JSONResponse({"ok": True})


def _bearer(request: Request) -> str:
    """The token of an `Authorization: Bearer` header; the scheme is case-insensitive (RFC 9110
    section 11.1)."""
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" else ""


def _int_param(request: Request, name: str, default: int) -> int:
    try:
        return non_negative(request.query_params.get(name), name, default)
    except BadParam as exc:
        raise _Denied(400, str(exc)) from None


class _Guard:
    """Wraps an endpoint: a denial is answered as JSON `{"error": reason}` with its status, and
    Redis away or refusing the gateway's ACL user a command is a 503, never a 500."""

    def __init__(self, alarm: Alarm) -> None:
        self.alarm = alarm

    def __call__(self, endpoint: Callable[[Request], Any]) -> Callable[[Request], Any]:
        async def guarded(request: Request) -> Response:
            try:
                response: Response = await endpoint(request)
            except _Denied as denied:
                return _problem(denied.reason, denied.status, denied.headers)
            except TRANSIENT:  # not the client's fault, and over soon: say so, and when to retry
                retry = {"Retry-After": str(RETRY_AFTER_S)}
                return _problem("Redis is not reachable; retry shortly", 503, retry)
            except ResponseError as exc:
                if (found := refusal(exc)) is None:
                    raise
                self.alarm.report(found, f"{request.method} {request.url.path}")
                retry = {"Retry-After": str(ACL_RETRY_AFTER_S)}
                return _problem(REFUSED, 503, retry)
            return response

        return guarded


REFUSED: Final = "Redis refuses this gateway a command it needs; an operator must fix its ACL"


def _problem(reason: str, status: int, headers: dict[str, str]) -> Response:
    return JSONResponse({"error": reason}, status_code=status, headers=headers)

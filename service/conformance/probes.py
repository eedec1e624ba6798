"""One probe per answer the OpenAPI document lists: the request that obtains it from the gateway,
over the scene of `scenario.py`. `ask` sends them all and returns what each got.

A probe names its route by the document's path template and its concrete path with the scene's
ids (`{session}`, `{finished}`, ...). Credentials vary on purpose: a Bearer header, the sign-in
cookie and `?token=` each authorise some probe, and each kind of bad token refuses one."""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from contextlib import AsyncExitStack
from types import MappingProxyType
from typing import Final, Literal, NamedTuple

import httpx
from redis.asyncio import Redis
from starlette.applications import Starlette
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from terminus.service.conformance.scenario import SCENE, Scene
from terminus.service.gateway.producing import ProducerRate
from terminus.service.gateway.routes import Limits, create_gateway
from terminus.service.gateway.sign_in import COOKIE
from terminus.service.gateway.tokens import mint
from terminus.service.redis.connect import no_resends
from terminus.service.redis.embedded import free_port
from terminus.service.settings import Settings

Token = Literal["session", "quiet", "other", "operator", "expired", "forged", "none", "producer"]
Via = Literal["bearer", "cookie", "query"]
Gateway = Literal["main", "limited", "unreachable"]

SECRET: Final = b"conformance-probe-secret-0123456"
OTHER_SESSION: Final = "contract-other-session"
BASE_URL: Final = "http://gateway"
FUTURE: Final = "Fri, 01 Jan 2100 00:00:00 GMT"  # If-Modified-Since later than any file
NOTHING: Final[Mapping[str, str]] = MappingProxyType({})


class Probe(NamedTuple):
    """A request and the status it must get; `repeat` sends it that many times (the last
    answer counts), for a limit only a second request reaches."""

    status: int
    method: str
    template: str
    path: str
    token: Token = "session"
    via: Via = "bearer"
    query: Mapping[str, str] = NOTHING
    headers: Mapping[str, str] = NOTHING
    body: bytes = b""
    gateway: Gateway = "main"
    repeat: int = 1
    first_body: bool = False  # a stream that does not end: its answer up to its first body


class Answer(NamedTuple):
    """A probe and what the gateway answered it."""

    probe: Probe
    request: httpx.Request
    response: httpx.Response


UPDATES: Final = "/v1/sessions/{session_id}/updates"
MESSAGES: Final = "/v1/sessions/{session_id}/messages"
TURN: Final = "/v1/turns/{turn_id}"
CANCEL: Final = "/v1/sessions/{session_id}/turns/{turn_id}/cancel"
TIMELINE: Final = "/v1/turns/{turn_id}/timeline"
RECENT: Final = "/v1/admin/turns"
COOKIE_PATH: Final = "/v1/session-cookie"
STATIC: Final = "/inspect/static/{path}"
UI_TURN: Final = "/v1/sessions/{session_id}/turns/{turn_id}/ui-message-stream"
UI_OPEN: Final = "/v1/sessions/{session_id}/ui-message-stream"
ATTEMPTS: Final = "/v1/sessions/{session_id}/turns/{turn_id}/attempts"
EVENTS: Final = "/v1/sessions/{session_id}/turns/{turn_id}/events"
COMMANDS: Final = "/v1/sessions/{session_id}/turns/{turn_id}/commands"

_updates, _messages = "/v1/sessions/{session}/updates", "/v1/sessions/{session}/messages"
_cancel = "/v1/sessions/{session}/turns/{turn}/cancel"
_ui_turn = "/v1/sessions/{session}/turns/{finished}/ui-message-stream"
_ui_open = "/v1/sessions/{session}/ui-message-stream"
BODY: Final = b"{}"  # every route refuses a body
BAD_LENGTH: Final = {"Content-Length": "x"}  # uvicorn refuses it first; another server may not
_turn = "/v1/sessions/{session}/turns/"
ANTHROPIC: Final = {"x-terminus-provider": "anthropic"}
ANSWER: Final = b"".join(  # a whole Anthropic answer, as its SSE
    b"event: %s\ndata: %s\n\n" % (kind.encode(), data.encode())
    for kind, data in (
        (
            "message_start",
            '{"type":"message_start","message":{"id":"m","model":"x",'
            '"usage":{"input_tokens":1,"output_tokens":0}}}',
        ),
        (
            "content_block_start",
            '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}',
        ),
        (
            "content_block_delta",
            '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}',
        ),
        ("content_block_stop", '{"type":"content_block_stop","index":0}'),
        (
            "message_delta",
            '{"type":"message_delta","delta":{"stop_reason":"end_turn"},'
            '"usage":{"output_tokens":1}}',
        ),
        ("message_stop", '{"type":"message_stop"}'),
    )
)
TOOL_ERROR: Final = b'{"events":[{"type":"tool-error","tool_call_id":"probe","error":"probe"}]}'

PROBES: Final = (
    Probe(200, "GET", UPDATES, _updates, via="query", query={"until_end": "1"}),
    Probe(400, "GET", UPDATES, _updates, headers={"Last-Event-ID": "abc"}),
    Probe(401, "GET", UPDATES, _updates, token="none"),
    Probe(403, "GET", UPDATES, _updates, token="other"),
    Probe(413, "GET", UPDATES, _updates, body=BODY),
    Probe(429, "GET", UPDATES, _updates, query={"until_end": "1"}, gateway="limited", repeat=2),
    Probe(503, "GET", UPDATES, _updates, query={"until_end": "1"}, gateway="unreachable"),
    Probe(200, "GET", MESSAGES, _messages),
    Probe(400, "GET", MESSAGES, _messages, query={"offset": "-1"}),
    Probe(401, "GET", MESSAGES, _messages, token="expired"),
    Probe(403, "GET", MESSAGES, _messages, token="operator"),
    Probe(413, "GET", MESSAGES, _messages, body=BODY),
    Probe(503, "GET", MESSAGES, _messages, gateway="unreachable"),
    Probe(200, "GET", UI_TURN, _ui_turn, query={"mode": "reset"}),
    Probe(400, "GET", UI_TURN, _ui_turn, query={"mode": "live"}),
    Probe(401, "GET", UI_TURN, _ui_turn, token="forged"),
    Probe(403, "GET", UI_TURN, _ui_turn, token="other"),
    Probe(404, "GET", UI_TURN, _ui_turn.replace("{finished}", "{archived}")),
    Probe(413, "GET", UI_TURN, _ui_turn, body=BODY),
    Probe(429, "GET", UI_TURN, _ui_turn, gateway="limited", repeat=2),
    Probe(503, "GET", UI_TURN, _ui_turn, gateway="unreachable"),
    Probe(200, "GET", UI_OPEN, _ui_open, via="query", first_body=True),
    Probe(204, "GET", UI_OPEN, "/v1/sessions/{quiet}/ui-message-stream", token="quiet"),
    Probe(400, "GET", UI_OPEN, _ui_open, query={"mode": "x"}),
    Probe(401, "GET", UI_OPEN, _ui_open, token="expired"),
    Probe(403, "GET", UI_OPEN, _ui_open, token="operator"),
    Probe(413, "GET", UI_OPEN, _ui_open, body=BODY),
    Probe(429, "GET", UI_OPEN, _ui_open, gateway="limited", repeat=2, first_body=True),
    Probe(503, "GET", UI_OPEN, _ui_open, gateway="unreachable"),
    Probe(200, "GET", TURN, "/v1/turns/{finished}"),
    Probe(400, "GET", TURN, "/v1/turns/{finished}", token="operator"),
    Probe(401, "GET", TURN, "/v1/turns/{finished}", token="forged"),
    Probe(403, "GET", TURN, "/v1/turns/{finished}", token="producer"),
    Probe(404, "GET", TURN, "/v1/turns/no-such-turn"),
    Probe(
        410, "GET", TURN, "/v1/turns/{archived}", token="operator", query={"session": "{session}"}
    ),
    Probe(413, "GET", TURN, "/v1/turns/{finished}", body=BODY),
    Probe(500, "GET", TURN, "/v1/turns/{unreadable}"),
    Probe(503, "GET", TURN, "/v1/turns/{finished}", gateway="unreachable"),
    Probe(202, "POST", CANCEL, _cancel.replace("{turn}", "{live}"), query={"reason": "probe"}),
    Probe(401, "POST", CANCEL, _cancel.replace("{turn}", "{live}"), via="cookie"),
    Probe(403, "POST", CANCEL, _cancel.replace("{turn}", "{live}"), token="other"),
    Probe(404, "POST", CANCEL, _cancel.replace("{turn}", "no-such-turn")),
    Probe(409, "POST", CANCEL, _cancel.replace("{turn}", "{finished}")),
    Probe(400, "POST", CANCEL, _cancel.replace("{turn}", "{live}"), headers=BAD_LENGTH),
    Probe(413, "POST", CANCEL, _cancel.replace("{turn}", "{live}"), body=BODY),
    Probe(503, "POST", CANCEL, _cancel.replace("{turn}", "{live}"), gateway="unreachable"),
    Probe(
        200,
        "POST",
        ATTEMPTS,
        _turn + "contract-produced/attempts",
        token="producer",
        headers=ANTHROPIC,
        body=ANSWER,
    ),
    Probe(400, "POST", ATTEMPTS, _turn + "{live}/attempts", token="producer"),
    Probe(401, "POST", ATTEMPTS, _turn + "{live}/attempts", token="none", headers=ANTHROPIC),
    Probe(403, "POST", ATTEMPTS, _turn + "{live}/attempts", headers=ANTHROPIC),
    Probe(
        404,
        "POST",
        ATTEMPTS,
        _turn + "no-such-turn/attempts",
        token="producer",
        headers={**ANTHROPIC, "x-terminus-attempt": "2"},
    ),
    Probe(
        409, "POST", ATTEMPTS, _turn + "{finished}/attempts", token="producer", headers=ANTHROPIC
    ),
    Probe(
        429,
        "POST",
        ATTEMPTS,
        _turn + "{finished}/attempts",
        token="producer",
        headers=ANTHROPIC,
        gateway="limited",
        repeat=2,
    ),
    Probe(
        503,
        "POST",
        ATTEMPTS,
        _turn + "{live}/attempts",
        token="producer",
        headers=ANTHROPIC,
        gateway="unreachable",
    ),
    Probe(200, "POST", EVENTS, _turn + "{live}/events", token="producer", body=TOOL_ERROR),
    Probe(400, "POST", EVENTS, _turn + "{live}/events", token="producer", body=BODY),
    Probe(401, "POST", EVENTS, _turn + "{live}/events", token="none", body=TOOL_ERROR),
    Probe(403, "POST", EVENTS, _turn + "{live}/events", body=TOOL_ERROR),
    Probe(404, "POST", EVENTS, _turn + "no-such-turn/events", token="producer", body=TOOL_ERROR),
    Probe(409, "POST", EVENTS, _turn + "{finished}/events", token="producer", body=TOOL_ERROR),
    Probe(
        429,
        "POST",
        EVENTS,
        _turn + "{finished}/events",
        token="producer",
        body=TOOL_ERROR,
        gateway="limited",
        repeat=2,
    ),
    Probe(
        503,
        "POST",
        EVENTS,
        _turn + "{live}/events",
        token="producer",
        body=TOOL_ERROR,
        gateway="unreachable",
    ),
    Probe(
        200,
        "GET",
        COMMANDS,
        _turn + "{finished}/commands",
        token="producer",
        query={"from": "0-0"},
    ),
    Probe(
        400,
        "GET",
        COMMANDS,
        _turn + "{finished}/commands",
        token="producer",
        headers={"Last-Event-ID": "abc"},
    ),
    Probe(401, "GET", COMMANDS, _turn + "{finished}/commands", token="none"),
    Probe(403, "GET", COMMANDS, _turn + "{finished}/commands", query={"from": "0-0"}),
    Probe(
        429,
        "GET",
        COMMANDS,
        _turn + "{finished}/commands",
        token="producer",
        query={"from": "0-0"},
        gateway="limited",
        repeat=2,
    ),
    Probe(
        503,
        "GET",
        COMMANDS,
        _turn + "{finished}/commands",
        token="producer",
        gateway="unreachable",
    ),
    Probe(200, "GET", TIMELINE, "/v1/turns/{finished}/timeline", via="cookie"),
    Probe(400, "GET", TIMELINE, "/v1/turns/{finished}/timeline", headers=BAD_LENGTH),
    Probe(401, "GET", TIMELINE, "/v1/turns/{finished}/timeline", token="none"),
    Probe(403, "GET", TIMELINE, "/v1/turns/{finished}/timeline", query={"session": "x"}),
    Probe(404, "GET", TIMELINE, "/v1/turns/no-such-turn/timeline", token="operator"),
    Probe(410, "GET", TIMELINE, "/v1/turns/{archived}/timeline", token="operator"),
    Probe(413, "GET", TIMELINE, "/v1/turns/{finished}/timeline", body=BODY),
    Probe(500, "GET", TIMELINE, "/v1/turns/{unreadable}/timeline"),
    Probe(503, "GET", TIMELINE, "/v1/turns/{finished}/timeline", gateway="unreachable"),
    Probe(200, "GET", RECENT, RECENT, token="operator", query={"limit": "5"}),
    Probe(400, "GET", RECENT, RECENT, token="operator", query={"limit": "x"}),
    Probe(401, "GET", RECENT, RECENT, token="none"),
    Probe(403, "GET", RECENT, RECENT),
    Probe(413, "GET", RECENT, RECENT, token="operator", body=BODY),
    Probe(503, "GET", RECENT, RECENT, token="operator", gateway="unreachable"),
    Probe(204, "POST", COOKIE_PATH, COOKIE_PATH),
    Probe(400, "POST", COOKIE_PATH, COOKIE_PATH, headers=BAD_LENGTH),
    Probe(401, "POST", COOKIE_PATH, COOKIE_PATH, token="expired"),
    Probe(403, "POST", COOKIE_PATH, COOKIE_PATH, token="producer"),
    Probe(413, "POST", COOKIE_PATH, COOKIE_PATH, body=BODY),
    Probe(200, "GET", COOKIE_PATH, COOKIE_PATH, token="operator", via="cookie"),
    Probe(200, "GET", COOKIE_PATH, COOKIE_PATH, token="none"),
    Probe(204, "DELETE", COOKIE_PATH, COOKIE_PATH, token="none"),
    Probe(200, "GET", "/healthz", "/healthz", token="none"),
    Probe(503, "GET", "/healthz", "/healthz", token="none", gateway="unreachable"),
    Probe(200, "GET", "/metrics", "/metrics", token="operator"),
    Probe(400, "GET", "/metrics", "/metrics", token="operator", headers=BAD_LENGTH),
    Probe(401, "GET", "/metrics", "/metrics", token="forged"),
    Probe(403, "GET", "/metrics", "/metrics"),
    Probe(413, "GET", "/metrics", "/metrics", token="operator", body=BODY),
    Probe(503, "GET", "/metrics", "/metrics", token="operator", gateway="unreachable"),
    Probe(200, "GET", "/inspect", "/inspect", token="none"),
    Probe(200, "GET", "/inspect/diagram.svg", "/inspect/diagram.svg", token="none"),
    Probe(200, "GET", "/inspect/states.css", "/inspect/states.css", token="none"),
    Probe(200, "GET", STATIC, "/inspect/static/inspector.js", token="none"),
    Probe(
        304,
        "GET",
        STATIC,
        "/inspect/static/inspector.js",
        token="none",
        headers={"If-Modified-Since": FUTURE},
    ),
    Probe(404, "GET", STATIC, "/inspect/static/no-such-file.js", token="none"),
)


LIMITED: Final = Limits(stream_opens=1, producer_rate=ProducerRate(per_s=0.01, burst=1))


@functools.cache
def _later() -> int:
    """One expiry for the whole run: a probe sent twice (`repeat`) carries the same token both
    times, so a per-token limit counts both (two seconds apart, they were two tokens)."""
    return int(time.time()) + 3600


def _token(kind: Token, scene: Scene) -> str:
    later = _later()
    match kind:
        case "session":
            return mint(SECRET, scene.session, later)
        case "quiet":
            return mint(SECRET, scene.quiet, later)
        case "other":
            return mint(SECRET, OTHER_SESSION, later)
        case "operator":
            return mint(SECRET, None, later)
        case "expired":
            return mint(SECRET, scene.session, int(time.time()) - 1)
        case "forged":
            return mint(b"not-the-gateways-secret-0123456", None, later)
        case "producer":
            return mint(SECRET, scene.session, later, producer=True)
        case "none":
            return ""


def request_of(probe: Probe, scene: Scene) -> httpx.Request:
    """The probe's request, its path and query filled in with the scene's ids."""
    names = scene._asdict()
    query = {k: v.format(**names) for k, v in probe.query.items()}
    headers = dict(probe.headers)
    token = _token(probe.token, scene)
    if token and probe.via == "bearer":
        headers["Authorization"] = f"Bearer {token}"
    elif token and probe.via == "cookie":
        headers["Cookie"] = f"{COOKIE}={token}"
    elif token:
        query["token"] = token
    url = httpx.URL(BASE_URL + probe.path.format(**names), params=query)
    return httpx.Request(probe.method, url, headers=headers, content=probe.body or None)


async def ask(redis: Redis, settings: Settings, scene: Scene = SCENE) -> list[Answer]:
    """Every probe of `PROBES`, sent in order to a gateway over `redis` (or, for the probes
    of `gateway="unreachable"`, over a client of a port nobody listens at, which never
    retries by itself)."""
    async with AsyncExitStack() as stack:
        dead = Redis(port=free_port(), socket_connect_timeout=1, retry=no_resends())
        stack.push_async_callback(dead.aclose)
        gateways = {
            "main": await _running(stack, create_gateway(redis, settings, SECRET)),
            "unreachable": await _running(stack, create_gateway(dead, settings, SECRET)),
        }
        answers = []
        for probe in PROBES:
            app = gateways.get(probe.gateway) or await _running(
                stack, create_gateway(redis, settings, SECRET, LIMITED)
            )
            answers.append(await _send(app, probe, scene))
        return answers


async def _running(stack: AsyncExitStack, app: Starlette) -> Starlette:
    """`app` with its lifespan entered on `stack` (httpx's ASGI transport sends none), so that
    its shutdown stops what it started (the gateway's shared reads)."""
    await stack.enter_async_context(app.router.lifespan_context(app))
    return app


async def _send(app: Starlette, probe: Probe, scene: Scene) -> Answer:
    transport = httpx.ASGITransport(app=_until_first_body(app) if probe.first_body else app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
        for _ in range(probe.repeat):
            request = request_of(probe, scene)
            response = await client.send(request)
    return Answer(probe, request, response)


def _until_first_body(app: ASGIApp) -> ASGIApp:
    """`app` with its answer ended at its first body part: httpx's ASGI transport returns only
    once the body is complete, and a live stream's never is. The app then reads a disconnect,
    as from a client that goes, and stops; what it sends after is dropped."""

    async def ended_early(scope: Scope, receive: Receive, send: Send) -> None:
        done = False

        async def first_body(message: Message) -> None:
            nonlocal done
            if done:
                return
            if message["type"] == "http.response.body" and message.get("body"):
                message, done = {**message, "more_body": False}, True
            await send(message)

        await app(scope, receive, first_body)

    return ended_early

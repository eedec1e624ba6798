"""The inspector: a live page for operators, and the JSON it reads (issue 4).

    GET /v1/admin/turns?limit=        the turns that changed state last, newest first (operator)
    GET /v1/turns/{id}/timeline       one turn's snapshot, state changes, non-chunk frames and
                                      chunk counts: a token for its session, or an operator token
                                      with `?session=` (without it, the turn's session is looked up)
    GET /inspect                      the page; it needs no token itself: the operator signs in
                                      once (a form that posts the token as Bearer to
                                      `/v1/session-cookie`), and the page's API calls carry the
                                      cookie, so the token is never in a URL
    GET /inspect/diagram.svg          the turn state diagram, drawn from the machine's table
    GET /inspect/states.css           one colour per state, the diagram's palette
    GET /inspect/static/...           the page's script and style, files of this package

The gateway (`service/gateway/routes.py`) mounts these routes and lends its token check and its
denial, so every endpoint answers a refusal the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import msgspec
from redis.asyncio import Redis
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from terminus.events.codec import encode_json
from terminus.service.fold.snapshots import SnapshotError
from terminus.service.gateway import diagram
from terminus.service.gateway.params import BadParam, non_negative
from terminus.service.gateway.timeline import (
    ARCHIVED,
    TurnArchived,
    find_session,
    recent_turns,
    timeline,
)
from terminus.service.gateway.tokens import Grant
from terminus.service.settings import Settings

PAGE_DIR: Final = Path(__file__).with_name("static")
MAX_TURNS: Final = 500
DEFAULT_TURNS: Final = 50
PAGE_HEADERS: Final = {
    # The page runs only its own files: data it shows can never become script or style.
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'",
    "Cache-Control": "no-store",
}

NO_TURN: Final = "no such turn"


def archived_answer(grant: Grant) -> tuple[int, str]:
    """Status and reason for a released turn: its tombstone names no session, so only an
    operator, who may read any turn, learns that it existed (410); a session gets 404."""
    return (410, ARCHIVED) if grant.admin else (404, NO_TURN)


Endpoint = Callable[[Request], Any]
GrantOf = Callable[[Request], tuple[str, Grant]]
Deny = Callable[[int, str], Exception]


class Inspector:
    """The inspector's endpoints over `redis`; `grant_of` checks tokens, `deny` refuses."""

    def __init__(self, redis: Redis, settings: Settings, grant_of: GrantOf, deny: Deny) -> None:
        self.redis, self.settings, self.grant_of, self.deny = redis, settings, grant_of, deny
        self.svg = diagram.svg().encode()
        self.css = "".join(f".st-{s}{{background:{c}}}\n" for s, c in diagram.COLOURS.items())

    def routes(self, guard: Callable[[Endpoint], Endpoint]) -> list[BaseRoute]:
        """The inspector's routes, each API endpoint wrapped in the gateway's `guard`."""
        return [
            Route("/v1/admin/turns", guard(self.turns)),
            Route("/v1/turns/{turn_id}/timeline", guard(self.timeline)),
            Route("/inspect", self.page),
            Route("/inspect/diagram.svg", self.diagram),
            Route("/inspect/states.css", self.states_css),
            Mount("/inspect/static", StaticFiles(directory=PAGE_DIR), name="inspector"),
        ]

    def admin(self, request: Request) -> Grant:
        """The request's grant if it is an operator's; else a denial (401 or 403)."""
        _, grant = self.grant_of(request)
        if not grant.admin:
            raise self.deny(403, "an operator token is required")
        return grant

    async def turns(self, request: Request) -> Response:
        self.admin(request)
        limit = min(self._int_param(request, "limit", DEFAULT_TURNS), MAX_TURNS)
        settings = self.settings
        found = await recent_turns(self.redis, settings.partitions, settings.prefix, limit)
        return Response(encode_json({"turns": found}), media_type="application/json")

    async def timeline(self, request: Request) -> Response:
        _, grant = self.grant_of(request)
        turn_id: str = request.path_params["turn_id"]
        session = await self._session_of(grant, turn_id, request.query_params.get("session"))
        settings = self.settings
        try:
            found = await timeline(
                self.redis, session, turn_id, settings.partitions, settings.prefix
            )
        except (msgspec.MsgspecError, SnapshotError):
            raise self.deny(500, "unreadable snapshot") from None
        except TurnArchived:
            raise self.deny(*archived_answer(grant)) from None
        if found is None:
            raise self.deny(404, NO_TURN)
        return Response(encode_json(found), media_type="application/json")

    async def _session_of(self, grant: Grant, turn_id: str, asked: str | None) -> str:
        """The session whose turn is read: a session token reads its own session only."""
        if grant.session is not None:
            if asked is not None and asked != grant.session:
                raise self.deny(403, "token is not for this session")
            return grant.session
        if asked:
            return asked
        settings = self.settings
        try:
            found = await find_session(self.redis, turn_id, settings.partitions, settings.prefix)
        except TurnArchived:  # only an operator gets here: a session token names its session
            raise self.deny(*archived_answer(grant)) from None
        if found is None:
            raise self.deny(404, NO_TURN)
        return found

    async def page(self, request: Request) -> Response:
        return HTMLResponse((PAGE_DIR / "index.html").read_bytes(), headers=PAGE_HEADERS)

    async def diagram(self, request: Request) -> Response:
        return Response(self.svg, media_type="image/svg+xml")

    async def states_css(self, request: Request) -> Response:
        return Response(self.css, media_type="text/css")

    def _int_param(self, request: Request, name: str, default: int) -> int:
        try:
            return non_negative(request.query_params.get(name), name, default)
        except BadParam as exc:
            raise self.deny(400, str(exc)) from None

"""The soak's gateway fault: a client that sends garbage cursors and tokens to every route of a
gateway throughout the run, while well-behaved SSE followers on the same gateway read the live
sessions' updates. Issue 15, defect 3: one client's `Last-Event-ID` of `abc` once failed the hub's
one shared XREAD, which stopped the live updates of every subscriber of the gateway.

The gateway is `python -m terminus gateway`, a child process in its own process group on a free
loopback port, with a token secret of its own so that tokens are minted here. Three loops run:

- the abuser, ~20 requests/s drawn from a seeded catalogue (`Catalogue`): bad cursors in
  `Last-Event-ID` and `?from=`; bad tokens (forged, expired, truncated, non-ASCII) and valid ones
  for another session or for the operator, in `Authorization` and `?token=`; bad offsets and
  limits; a body. Between them go requests a client may make: stream opens, pages of messages,
  turns. A probe the gateway must refuse must get a 4xx, a probe it may serve one of its
  documented answers, and no body may hold a traceback. Refusals happen before Redis is asked;
  only a served probe reads Redis (stream opens included: a stream is not opened onto a Redis that
  is away), and while Redis is away it answers 503 (documented, counted as `redis_away_503`); any
  other 5xx is a failure.
- the health poller: `/healthz` four times a second (503 while Redis is away, as documented).
- the followers: each follows a live session's updates until the session is over and quiet, or
  `FOLLOW_S`, resuming with `Last-Event-ID` after any cut or 503 (Redis away, counted as
  `follower_503`), and checks that the cursors it gets strictly increase. Gaps between frames
  are reported, not judged: the soak's other faults (worker kills, Redis restarts) make gaps of
  seconds.
"""

from __future__ import annotations

import asyncio
import random
import re
import secrets
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Self
from urllib.parse import quote

import httpx
from httpx_sse import SSEError, aconnect_sse

from bench.common.children import gateway, wait_healthy
from terminus.service.gateway.tokens import SECRET_VAR, mint
from terminus.service.redis.embedded import free_port
from terminus.service.sdk.gateway_source import retry_after
from terminus.service.settings import Settings
from tests.support.faults import harness

HOST: Final = "127.0.0.1"
RATE_PER_S: Final = 20.0
IN_FLIGHT: Final = 64  # probes awaiting an answer at most (a slow gateway slows the abuser)
HEALTH_EVERY_S: Final = 0.25
FOLLOWERS: Final = 2
FOLLOW_S: Final = 30.0
QUIET_S: Final = 4.0
TICK_S: Final = 0.25
SAMPLES: Final = 5
BODY_BYTES: Final = 4000
TOKEN_TTL_S: Final = 3600
WRONG_SECRET: Final = b"not-the-gateway-secret-0123456789"
U64: Final = str(2**64 - 1)

BAD_CURSORS: Final = (
    "abc",
    "1-2-3",
    "1" * 24,
    "9" * 10_000,
    "+",
    "-",
    "$",
    ">",
    "1-",
    "-1",
    "0x10",
    " 1-0",
    "18446744073709551616-0",
    "1-18446744073709551616",
    "\uff11-\uff10",
    "é",
    "",
)
GOOD_CURSORS: Final = (None, "0", "0-0", "1-1", U64, f"{U64}-{U64}")  # the last two: far future
BAD_INTS: Final = ("-1", "abc", "1e3", "²", "\u0663", "", " 1", "9" * 19, "0x10")
ODD_CHARS: Final = "aZ09-_.:{}*?#% é☃\x00\t\u202e"
# What the gateway's log names: exceptions in tracebacks (chained and grouped ones are indented
# and prefixed with '|' or '+'), and the hub's warnings about its shared read.
EXCEPTION_LINE: Final = re.compile(
    r"^[\s|+]*([A-Za-z_][\w.]*(?:Error|Exception|Group))(?::|$)", re.M
)
HUB_LINE: Final = re.compile(r"^hub: ([^(\n]{1,60})", re.M)

Headers = dict[bytes, bytes]
Params = dict[str, str]


@dataclass(frozen=True)
class Probe:
    """One request of the abuser and what the gateway may answer: `expect` None means a refusal
    (any 4xx); `redis` marks a probe served from Redis, which answers 503 while Redis is away."""

    kind: str
    path: str
    expect: frozenset[int] | None = None
    params: Params = field(default_factory=dict)
    headers: Headers = field(default_factory=dict)
    body: bytes | None = None
    redis: bool = False


def carried(rng: random.Random, token: str) -> tuple[Headers, Params]:
    """`token` as `Authorization: Bearer` (non-ASCII as UTF-8 bytes) or as `?token=`; always the
    latter for what a header cannot carry (control characters)."""
    if rng.random() < 0.5 and token.isprintable():
        return {b"authorization": b"Bearer " + token.encode()}, {}
    return {}, {"token": token}


class Catalogue:
    """Draws probes against live sessions; tokens are minted with the gateway's secret."""

    def __init__(
        self, secret: bytes, rng: random.Random, sessions: Callable[[], Sequence[str]]
    ) -> None:
        self.secret, self.rng, self.sessions = secret, rng, sessions
        self.makers: dict[Callable[[str], Probe], int] = {
            self.updates_bad_cursor: 6,
            self.updates_bad_token: 4,
            self.updates_other: 2,
            self.updates_open: 2,
            self.updates_odd_session: 1,
            self.messages_bad: 3,
            self.messages_page: 1,
            self.turn_refused: 2,
            self.turn_lookup: 1,
            self.timeline_refused: 1,
            self.timeline_lookup: 1,
            self.operator_refused: 2,
            self.metrics_served: 1,
            self.healthz: 1,
            self.with_body: 1,
        }

    def draw(self) -> Probe:
        """A probe of a weighted random kind, against a live session if there is one."""
        live = self.sessions()
        session = self.rng.choice(live) if live else "no-live-session"
        maker = self.rng.choices(list(self.makers), weights=list(self.makers.values()))[0]
        return maker(session)

    def good(self, session: str | None) -> str:
        # A distinct expiry makes a distinct token: each has its own stream-open budget (429).
        expires = int(time.time()) + TOKEN_TTL_S + self.rng.randrange(10**6)
        return mint(self.secret, session, expires)

    def bad(self, session: str) -> tuple[Headers, Params]:
        """Credentials that grant nothing (401)."""
        good, now = self.good(session), int(time.time())
        tokens = [
            mint(WRONG_SECRET, session, now + TOKEN_TTL_S),  # forged
            mint(self.secret, session, now - self.rng.randrange(1, 10**6)),  # expired
            good[: self.rng.randrange(len(good))],  # truncated
            good[:-1] + "é",
            good + "x",
            "v1.admin.99999999999.AAAA",
            "v1...",
            "a" * 10_000,
            "".join(self.rng.choices(ODD_CHARS, k=self.rng.randrange(1, 40))),
        ]
        token = self.rng.choice(tokens)
        schemes: list[Headers] = [
            {b"authorization": b"Basic " + good.encode()},  # a good token, the wrong scheme
            {b"authorization": b"Bearer" + good.encode()},  # no space: no scheme at all
            {b"authorization": b"Bearer"},
            {},
        ]
        if self.rng.random() < 0.2:
            return self.rng.choice(schemes), {}
        return carried(self.rng, token)

    def other(self, session: str) -> tuple[Headers, Params]:
        """A valid token, but for another session or the operator's (403 on a session route)."""
        return carried(self.rng, self.good(self.rng.choice([None, session + "-other"])))

    def cursor(self, cursor: str, headers: Headers, params: Params) -> None:
        """`cursor` as `Last-Event-ID` where HTTP can carry it as is, else as `?from=`."""
        if cursor.isprintable() and cursor == cursor.strip() != "" and self.rng.random() < 0.5:
            headers[b"last-event-id"] = cursor.encode()
        else:
            params["from"] = cursor

    def turn_id(self, session: str) -> str:
        """A turn id for a path: maybe the session's first turn, maybe an odd one."""
        odd = ["t" + "é" * 3, "9" * 300, "{x}", "*", "%00", ".."]
        return quote(self.rng.choice([f"{session}-t1", *odd]), safe="")

    def updates_bad_cursor(self, session: str) -> Probe:
        headers, params = carried(self.rng, self.good(session))
        self.cursor(self.rng.choice(BAD_CURSORS), headers, params)
        return Probe("updates_bad_cursor", _updates(session), None, params, headers)

    def updates_bad_token(self, session: str) -> Probe:
        headers, params = self.bad(session)
        self.cursor(self.rng.choice(BAD_CURSORS + GOOD_CURSORS[1:]), headers, params)
        return Probe("updates_bad_token", _updates(session), None, params, headers)

    def updates_other(self, session: str) -> Probe:
        headers, params = self.other(session)
        return Probe("updates_other_token", _updates(session), None, params, headers)

    def updates_open(self, session: str) -> Probe:
        """A stream a client may open (closed at once): 200, or 429 past the open budget."""
        headers, params = carried(self.rng, self.good(session))
        if (cursor := self.rng.choice(GOOD_CURSORS)) is not None:
            self.cursor(cursor, headers, params)
        path = _updates(session)
        return Probe("updates_open", path, frozenset({200, 429}), params, headers, redis=True)

    def updates_odd_session(self, session: str) -> Probe:
        """A stream of a session named with odd characters ('/' would leave the route)."""
        odd = "odd-" + "".join(self.rng.choices(ODD_CHARS, k=self.rng.randrange(1, 30)))
        headers, params = carried(self.rng, self.good(odd))
        return Probe(
            "updates_odd_session", _updates(odd), frozenset({200, 429}), params, headers, redis=True
        )

    def messages_bad(self, session: str) -> Probe:
        if self.rng.random() < 0.5:
            headers, params = self.bad(session)
        else:
            headers, params = carried(self.rng, self.good(session))
            params[self.rng.choice(["offset", "limit"])] = self.rng.choice(BAD_INTS)
        return Probe("messages_refused", _session_path(session, "messages"), None, params, headers)

    def messages_page(self, session: str) -> Probe:
        headers, params = carried(self.rng, self.good(session))
        params |= {"offset": str(self.rng.randrange(20)), "limit": str(self.rng.randrange(600))}
        path = _session_path(session, "messages")
        return Probe("messages_page", path, frozenset({200}), params, headers, redis=True)

    def turn_refused(self, session: str) -> Probe:
        if self.rng.random() < 0.5:  # an operator token without `?session=`: 400
            headers, params = carried(self.rng, self.good(None))
        else:
            headers, params = self.bad(session)
        return Probe("turn_refused", f"/v1/turns/{self.turn_id(session)}", None, params, headers)

    def turn_lookup(self, session: str) -> Probe:
        headers, params = carried(self.rng, self.good(session))
        path, found = f"/v1/turns/{self.turn_id(session)}", frozenset({200, 404, 410})
        return Probe("turn_lookup", path, found, params, headers, redis=True)

    def timeline_refused(self, session: str) -> Probe:
        if self.rng.random() < 0.5:  # a session token asking for another session: 403
            headers, params = carried(self.rng, self.good(session))
            params["session"] = session + "-other"
        else:
            headers, params = self.bad(session)
        path = f"/v1/turns/{self.turn_id(session)}/timeline"
        return Probe("timeline_refused", path, None, params, headers)

    def timeline_lookup(self, session: str) -> Probe:
        headers, params = carried(self.rng, self.good(session))
        path, found = f"/v1/turns/{self.turn_id(session)}/timeline", frozenset({200, 404, 410})
        return Probe("timeline_lookup", path, found, params, headers, redis=True)

    def operator_refused(self, session: str) -> Probe:
        """The operator's routes with a session token (403), bad credentials or a bad limit."""
        path = self.rng.choice(["/metrics", "/v1/admin/turns"])
        pick = self.rng.randrange(3)
        if pick == 0:
            headers, params = carried(self.rng, self.good(session))
        elif pick == 1:
            headers, params = self.bad(session)
        else:
            headers, params = carried(self.rng, self.good(None))
            path, params["limit"] = "/v1/admin/turns", self.rng.choice(BAD_INTS)
        return Probe("operator_refused", path, None, params, headers)

    def metrics_served(self, session: str) -> Probe:
        headers, params = carried(self.rng, self.good(None))
        return Probe("metrics", "/metrics", frozenset({200}), params, headers, redis=True)

    def healthz(self, session: str) -> Probe:
        """Health with garbage credentials and cursor, which it ignores: 200, or 503 (Redis)."""
        headers, params = self.bad(session)
        self.cursor(self.rng.choice(BAD_CURSORS), headers, params)
        return Probe("healthz", "/healthz", frozenset({200, 503}), params, headers)

    def with_body(self, session: str) -> Probe:
        """A body on a session route, with a valid token: 413 (every endpoint is a GET)."""
        headers, params = carried(self.rng, self.good(session))
        path = self.rng.choice([_updates(session), _session_path(session, "messages")])
        body = self.rng.randbytes(self.rng.randrange(1, 5000))
        return Probe("with_body", path, None, params, headers, body)


def _session_path(session: str, what: str) -> str:
    return f"/v1/sessions/{quote(session, safe='')}/{what}"


def _updates(session: str) -> str:
    return _session_path(session, "updates")


class Abuser:
    """Sends the catalogue's probes and polls health; counts answers, keeps what is wrong."""

    def __init__(self, client: httpx.AsyncClient, catalogue: Catalogue, rng: random.Random) -> None:
        self.client, self.catalogue, self.rng = client, catalogue, rng
        self.by_probe: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self.transport_errors = 0
        self.unexpected: list[str] = []
        self.tracebacks: list[str] = []
        self.redis_away = 0  # 503s of served probes: Redis was away
        self.health_polls = 0
        self.unhealthy = 0  # health polls that failed

    async def run(self) -> None:
        """Probes at ~RATE_PER_S and health polls, until cancelled."""
        slots = asyncio.Semaphore(IN_FLIGHT)
        async with asyncio.TaskGroup() as group:
            group.create_task(self._poll_health())
            while True:
                await asyncio.sleep(self.rng.uniform(0.5, 1.5) / RATE_PER_S)
                await slots.acquire()
                group.create_task(self._send(self.catalogue.draw(), slots))

    async def _send(self, probe: Probe, slots: asyncio.Semaphore) -> None:
        try:
            async with self.client.stream(
                "GET", probe.path, params=probe.params, headers=probe.headers, content=probe.body
            ) as response:
                # A stream the gateway opened would never end: its status is all we need.
                streaming = response.headers.get("content-type", "").startswith("text/event")
                body = b"" if streaming else await _head(response)
        except httpx.HTTPError:  # the gateway gone or too slow: the followers show the effect
            self.transport_errors += 1
            return
        finally:
            slots.release()
        self._judge(probe, response.status_code, body)

    def _judge(self, probe: Probe, status: int, body: bytes) -> None:
        self.by_probe[probe.kind][str(status)] += 1
        what = f"{probe.kind} {status} {_shown(probe)}: {body[:200]!r}"
        allowed = probe.expect or range(400, 500)  # no `expect`: a refusal, any 4xx
        if b"Traceback" in body:
            self.tracebacks.append(what)
        elif status in allowed:
            return
        elif probe.redis and status == 503:
            self.redis_away += 1
        else:
            self.unexpected.append(what)

    async def _poll_health(self) -> None:
        while True:
            try:
                response = await self.client.get("/healthz", timeout=1.0)
                healthy = response.status_code == 200
            except httpx.HTTPError:
                healthy = False
            self.health_polls += 1
            if not healthy:
                self.unhealthy += 1
            await asyncio.sleep(HEALTH_EVERY_S)

    def report(self) -> dict[str, Any]:
        by_status: Counter[str] = Counter()
        for counts in self.by_probe.values():
            by_status.update(counts)
        return {
            "requests": by_status.total(),
            "by_status": dict(sorted(by_status.items())),
            "by_probe": {
                kind: dict(sorted(c.items())) for kind, c in sorted(self.by_probe.items())
            },
            "transport_errors": self.transport_errors,
            "redis_away_503": self.redis_away,
            "unexpected": len(self.unexpected),
            "tracebacks": len(self.tracebacks),
            "health_polls": self.health_polls,
            "health_unhealthy": self.unhealthy,
        }

    def failures(self) -> list[str]:
        found = [f"gateway answered a probe wrongly: {w}" for w in self.unexpected[:SAMPLES]]
        found += [f"traceback in a gateway answer: {w}" for w in self.tracebacks[:SAMPLES]]
        return found


async def _head(response: httpx.Response) -> bytes:
    """The first BODY_BYTES of the body."""
    body = b""
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) >= BODY_BYTES:
            break
    return body[:BODY_BYTES]


def _shown(probe: Probe) -> str:
    """The probe's request, cut short for a report."""
    return f"{probe.path[:80]} params={probe.params!r:.120} headers={probe.headers!r:.160}"


@dataclass
class Followed:
    """One session being followed: its token, the last cursor received and when, and when the
    session was last seen being published."""

    session: str
    token: str
    started: float
    last_at: float
    live_at: float
    last: tuple[int, int] | None = None
    last_id: str | None = None


class Followers:
    """Well-behaved SSE clients: one live session after another, checked for increasing cursors."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        secret: bytes,
        rng: random.Random,
        sessions: Callable[[], Sequence[str]],
    ) -> None:
        self.client, self.secret, self.rng, self.sessions = client, secret, rng, sessions
        self.following: set[str] = set()
        self.followed = self.frames = self.resumes = self.rate_limited = 0
        self.longest_gap_s, self.gap_session = 0.0, ""
        self.disorder: list[str] = []
        self.refused: list[str] = []
        self.redis_away = 0  # stream opens answered 503 while Redis was away

    async def run(self) -> None:
        """Pick a live session no other follower follows, follow it, again; until cancelled."""
        while True:
            free = [s for s in self.sessions() if s not in self.following]
            if not free:
                await asyncio.sleep(TICK_S)
                continue
            session = self.rng.choice(free)
            self.following.add(session)
            try:
                await self._follow(session)
            finally:
                self.following.discard(session)

    async def _follow(self, session: str) -> None:
        now = time.monotonic()
        expires = int(time.time()) + TOKEN_TTL_S
        state = Followed(session, mint(self.secret, session, expires), now, now, now)
        self.followed += 1
        reading = asyncio.create_task(self._read(state))
        try:
            while not reading.done() and not self._over(state):
                await asyncio.sleep(TICK_S)
        finally:
            # A stream that went silent while its session was live: a gap no frame closed.
            self._gap(state, time.monotonic())
            reading.cancel()
            # asyncio.wait, not `suppress(CancelledError): await reading`: that would also
            # swallow a cancel of this follower arriving meanwhile, and the soak's end would
            # wait for ever on a follower that goes on following.
            await asyncio.wait([reading])
            if not reading.cancelled() and (error := reading.exception()) is not None:
                raise error

    def _over(self, state: Followed) -> bool:
        """Whether the session is over (neither frames nor publishing for QUIET_S) or followed
        long enough; notes when it was last seen being published."""
        now = time.monotonic()
        if state.session in self.sessions():
            state.live_at = now
        quiet = now - max(state.last_at, state.live_at) >= QUIET_S
        return quiet or now - state.started >= FOLLOW_S

    async def _read(self, state: Followed) -> None:
        """The session's updates, resumed from the last cursor after every cut."""
        url = _updates(state.session)
        while True:
            headers = {"Authorization": f"Bearer {state.token}"}
            if state.last_id is not None:
                headers["Last-Event-ID"] = state.last_id
            wait = 0.2
            try:
                async with aconnect_sse(self.client, "GET", url, headers=headers) as source:
                    status = source.response.status_code
                    if status == 429:  # our own resumes came too fast: as a client would, wait
                        self.rate_limited += 1
                        wait = retry_after(source.response.headers.get("retry-after")) or 1.0
                    elif status == 503:  # Redis is away: as a client would, wait and resume
                        self.redis_away += 1
                        wait = retry_after(source.response.headers.get("retry-after")) or 1.0
                    elif status != 200:
                        self.refused.append(f"{state.session}: {status}")
                        return
                    else:
                        async for event in source.aiter_sse():
                            if event.data:  # a comment ping dispatches an event without data
                                self._frame(state, event.id)
            except (httpx.HTTPError, SSEError):
                pass  # cut: resume from the last cursor
            self.resumes += 1
            await asyncio.sleep(wait)

    def _frame(self, state: Followed, cursor: str) -> None:
        now = time.monotonic()
        key = _cursor_key(cursor)
        if key is None or (state.last is not None and key <= state.last):
            self.disorder.append(f"{state.session}: {cursor!r} after {state.last_id!r}")
        else:
            state.last, state.last_id = key, cursor
        self._gap(state, now)
        state.last_at = now
        self.frames += 1

    def _gap(self, state: Followed, now: float) -> None:
        """The silence since the last frame, as far as it lasted while the session was being
        published (a stream stopped by a bad client would stay silent while it is)."""
        end = now if state.session in self.sessions() else state.live_at
        gap = end - state.last_at
        if gap > self.longest_gap_s:
            self.longest_gap_s, self.gap_session = gap, state.session

    def report(self) -> dict[str, Any]:
        return {
            "followed_sessions": self.followed,
            "frames_followed": self.frames,
            "longest_gap_s": round(self.longest_gap_s, 2),
            "longest_gap_session": self.gap_session,
            "follower_resumes": self.resumes,
            "follower_429": self.rate_limited,
            "follower_503": self.redis_away,
            "non_increasing": len(self.disorder),
            "follower_refused": len(self.refused),
        }

    def failures(self) -> list[str]:
        found = [f"follower got a cursor out of order: {d}" for d in self.disorder[:SAMPLES]]
        found += [f"follower refused: {r}" for r in self.refused[:SAMPLES]]
        if not self.frames:
            found.append(f"followers received no frame ({self.followed} sessions followed)")
        return found


def _cursor_key(cursor: str) -> tuple[int, int] | None:
    ms, _, seq = cursor.partition("-")
    if not (ms.isascii() and ms.isdigit() and seq.isascii() and seq.isdigit()):
        return None
    return int(ms), int(seq)


class GatewayAbuse:
    """Starts `python -m terminus gateway` as a child process (its own process group) on a free
    loopback port with `env` (the worker environment of `settings`, overridden by `env`, plus a
    random TERMINUS_TOKEN_SECRET), waits for /healthz, and stops it on exit. `run` abuses it and
    follows live sessions (`sessions()`: ids being published now) until cancelled."""

    def __init__(
        self,
        env: dict[str, str],
        settings: Settings,
        tmp: Path,
        seed: int,
        sessions: Callable[[], Sequence[str]],
    ) -> None:
        text = secrets.token_urlsafe(32)
        self.secret, self.port = text.encode(), free_port()
        env = harness.worker_env(settings) | env | {SECRET_VAR: text}
        self.log = tmp / "gateway.log"
        self.child = gateway(env, HOST, self.port, self.log)
        self.stopped = False
        self.died: int | None = None
        base = f"http://{HOST}:{self.port}"
        limits = httpx.Limits(max_connections=IN_FLIGHT + 8)
        self.client = httpx.AsyncClient(base_url=base, timeout=10.0, limits=limits)
        # A follower's stream is quiet between turns; the gateway pings every 15 s.
        timeout = httpx.Timeout(10.0, read=45.0)
        self.follow_client = httpx.AsyncClient(base_url=base, timeout=timeout)
        rng = random.Random(seed)
        self.abuser = Abuser(self.client, Catalogue(self.secret, rng, sessions), rng)
        self.followers = Followers(self.follow_client, self.secret, rng, sessions)

    async def __aenter__(self) -> Self:
        await self.child.start()
        try:
            await wait_healthy(HOST, self.port, self.child)
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.died, self.stopped = self.exited(), True  # what our own stop does is no failure
        await self.child.stop()
        await self.client.aclose()
        await self.follow_client.aclose()

    async def run(self) -> None:
        """The abuser, the health poller and the followers, until cancelled."""
        async with asyncio.TaskGroup() as group:
            group.create_task(self.abuser.run())
            for _ in range(FOLLOWERS):
                group.create_task(self.followers.run())

    def exited(self) -> int | None:
        """The gateway's exit status if it exited by itself (before we stopped it)."""
        process = self.child.process
        if self.stopped or process is None:
            return self.died
        return process.returncode

    def report(self) -> dict[str, Any]:
        """JSON-able counters: the abuser's, the health poller's, the followers', the gateway's."""
        log = self.log.read_text(errors="replace") if self.log.exists() else ""
        exceptions, hub = Counter(EXCEPTION_LINE.findall(log)), Counter(HUB_LINE.findall(log))
        return (
            self.abuser.report()
            | self.followers.report()
            | {
                "gateway_exit": self.exited(),
                "gateway_log_tracebacks": log.count("Traceback"),
                "gateway_log_exceptions": dict(exceptions),
                "gateway_log_hub_warnings": dict(hub),
            }
        )

    def failures(self) -> list[str]:
        """Each check that did not hold, in words; empty when every one held."""
        found = self.abuser.failures() + self.followers.failures()
        if (status := self.exited()) is not None:
            found.append(f"gateway exited with {status}: {self.child.log_tail()}")
        return found

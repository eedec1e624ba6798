"""The inspector's routes on the gateway (uvicorn, loopback) over a real Redis and worker: the
JSON it reads, who may read it, the page and its files, the diagram."""

from __future__ import annotations

import time
from typing import Final

import httpx
import test_gateway
from test_gateway import (
    DEADLINE_S,
    SECRET,
    Served,
    auth,
    turn_events,
)

from terminus.service.fold.releases import TOMBSTONE
from terminus.service.gateway.diagram import svg
from terminus.service.gateway.timeline import ARCHIVED, timeline
from terminus.service.gateway.tokens import mint
from terminus.service.keys import keys_for_session
from tests.support.polling import until

SESSION: Final = "s-insp"
TURN: Final = "t-insp"
served = test_gateway.served  # the fixture: a worker and the gateway on a loopback port


async def _published(served: Served) -> None:
    await served.producer.publish(turn_events(SESSION, TURN, 3))

    async def finished() -> bool:
        s = served.settings
        found = await timeline(served.redis, SESSION, TURN, s.partitions, s.prefix)
        return found is not None and found.turn.state == "finished"

    await until(finished, "the turn to finish")


def _bad_tokens() -> list[dict[str, str]]:
    expired = mint(SECRET, None, int(time.time()) - 1)
    forged = mint(b"another-secret-0123456", None, 2**40)
    bearers = ["v1.admin.1.forged", expired, forged]
    return [{}, *({"Authorization": f"Bearer {b}"} for b in bearers)]


async def test_recent_turns_need_an_operator_token(served: Served) -> None:
    await _published(served)
    url = f"{served.base}/v1/admin/turns"
    async with httpx.AsyncClient(timeout=DEADLINE_S) as client:
        for headers in _bad_tokens():
            assert (await client.get(url, headers=headers)).status_code == 401, headers
        assert (await client.get(url, headers=auth(SESSION))).status_code == 403
        listed = await client.get(f"{url}?limit=5", headers=auth(None))
        by_query = await client.get(f"{url}?token={auth(None)['Authorization'][7:]}")
        bad_limit = await client.get(f"{url}?limit=-1", headers=auth(None))
    assert listed.status_code == by_query.status_code == 200
    turns = listed.json()["turns"]
    assert [(t["session_id"], t["turn_id"], t["state"]) for t in turns] == [
        (SESSION, TURN, "finished")
    ]
    assert by_query.json() == listed.json()
    assert bad_limit.status_code == 400


async def test_a_timeline_is_read_by_its_session_or_an_operator_only(served: Served) -> None:
    await _published(served)
    url = f"{served.base}/v1/turns/{TURN}/timeline"
    async with httpx.AsyncClient(timeout=DEADLINE_S) as client:
        for headers in _bad_tokens():
            assert (await client.get(url, headers=headers)).status_code == 401, headers
        named_other = await client.get(f"{url}?session={SESSION}", headers=auth("s-other"))
        other = await client.get(url, headers=auth("s-other"))
        own = await client.get(url, headers=auth(SESSION))
        admin = await client.get(url, headers=auth(None))
        admin_named = await client.get(f"{url}?session={SESSION}", headers=auth(None))
        missing = await client.get(f"{served.base}/v1/turns/t-none/timeline", headers=auth(None))
    assert named_other.status_code == 403
    assert other.status_code == 404  # as /v1/turns/{id}: a session token learns no other ids
    assert own.status_code == admin.status_code == admin_named.status_code == 200
    assert own.json() == admin.json() == admin_named.json()
    body = own.json()
    assert body["turn"]["state"] == "finished"
    kinds = [i["kind"] for i in body["items"]]
    assert kinds[-1] == "turn_finished"
    path = [i["detail"]["dest"] for i in body["items"] if i["kind"] == "transition"]
    assert path == ["streaming", "awaiting_terminal", "finished"]
    assert missing.status_code == 404


async def test_the_page_its_files_and_the_diagram_are_served(served: Served) -> None:
    async with httpx.AsyncClient(timeout=DEADLINE_S) as client:
        page = await client.get(f"{served.base}/inspect")
        script = await client.get(f"{served.base}/inspect/static/inspector.js")
        style = await client.get(f"{served.base}/inspect/static/inspector.css")
        colours = await client.get(f"{served.base}/inspect/states.css")
        drawn = await client.get(f"{served.base}/inspect/diagram.svg")
        escape = await client.get(f"{served.base}/inspect/static/../gateway.py")
    assert page.status_code == 200
    assert "inspect/static/inspector.js" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["referrer-policy"] == "no-referrer"
    assert script.status_code == style.status_code == colours.status_code == 200
    assert "textContent" in script.text
    assert ".st-retrying{" in colours.text
    assert drawn.headers["content-type"].startswith("image/svg+xml")
    assert drawn.text == svg()
    assert escape.status_code == 404


async def test_metrics_need_an_operator_token(served: Served) -> None:
    async with httpx.AsyncClient(timeout=DEADLINE_S) as client:
        assert (await client.get(f"{served.base}/metrics")).status_code == 401
        session = await client.get(f"{served.base}/metrics", headers=auth(SESSION))
        admin = await client.get(f"{served.base}/metrics", headers=auth(None))
    assert session.status_code == 403
    assert admin.status_code == 200
    assert admin.headers["content-type"].startswith("text/plain; version=0.0.4")


async def test_an_archived_turn_is_gone_for_an_operator_and_unknown_to_a_session(
    served: Served,
) -> None:
    """A released turn's tombstone names no session: an operator learns it was archived (410),
    a session token (whose turn it may not be) learns nothing (404), on both turn endpoints."""
    await _published(served)
    s = served.settings
    await served.redis.set(keys_for_session(SESSION, s.partitions, s.prefix).turn(TURN), TOMBSTONE)
    turn_url, timeline_url = (
        f"{served.base}/v1/turns/{TURN}",
        f"{served.base}/v1/turns/{TURN}/timeline",
    )
    async with httpx.AsyncClient(timeout=DEADLINE_S) as client:
        operator = [
            await client.get(f"{turn_url}?session={SESSION}", headers=auth(None)),
            await client.get(timeline_url, headers=auth(None)),  # found by its id
            await client.get(f"{timeline_url}?session={SESSION}", headers=auth(None)),
        ]
        own = [
            await client.get(turn_url, headers=auth(SESSION)),
            await client.get(timeline_url, headers=auth(SESSION)),
        ]
    assert [r.status_code for r in operator] == [410, 410, 410]
    assert {r.json()["error"] for r in operator} == {ARCHIVED}
    assert [r.status_code for r in own] == [404, 404]
    assert {r.json()["error"] for r in own} == {"no such turn"}

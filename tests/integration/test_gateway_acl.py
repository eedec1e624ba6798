"""A command Redis refuses the gateway's ACL user is a 503 problem, as the contract documents it,
and one operator log line that names the command and its ACL category.

Issue 31, item 7: a NOPERM reached a client as a bare 500 with a traceback in the log. The user
here is a real ACL user, made on the test's Redis for this test only and deleted after.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final, cast
from urllib.parse import quote, urlsplit, urlunsplit

import httpx
import pytest
from redis.asyncio import Redis

from terminus.service.conformance.check import mismatches
from terminus.service.conformance.probes import BASE_URL, Answer, Probe
from terminus.service.gateway.routes import create_gateway
from terminus.service.gateway.tokens import mint
from terminus.service.redaction import SecretUrl
from terminus.service.redis.acl import CATEGORIES, SINCE_7
from terminus.service.redis.connect import connect
from terminus.service.settings import Settings

SECRET: Final = b"acl-test-secret-0123456789abcdef"
OPENAPI: Final = Path(__file__).parents[2] / "docs" / "contract" / "openapi.json"
MESSAGES: Final = "/v1/sessions/{session_id}/messages"


def as_user(url: str, user: str, password: str) -> str:
    """`url` signing in as `user` (its TLS query kept)."""
    parts = urlsplit(url)
    netloc = f"{quote(user, safe='')}:{quote(password, safe='')}@{parts.hostname}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


@pytest.fixture
async def lacking_zrange(
    admin_redis: Redis, redis_url: str, prefix: str
) -> AsyncIterator[tuple[str, str]]:
    """A user of the test's prefix with every command but ZRANGE (which /messages sends first);
    its URL and name. Deleted after the test."""
    user, password = f"{prefix}-acl", secrets.token_urlsafe(16)
    rules = [f"~{prefix}*", "resetchannels", "+@all", "-zrange"]
    await admin_redis.acl_setuser(
        user, enabled=True, passwords=[f"+{password}"], reset_keys=True, **_rules(rules)
    )
    try:
        yield as_user(redis_url, user, password), user
    finally:
        await admin_redis.acl_deluser(user)


def _rules(rules: list[str]) -> dict[str, Any]:
    keys = [r[1:] for r in rules if r.startswith("~")]
    commands = [r for r in rules if r[0] in "+-"]
    return {"keys": keys, "commands": commands, "reset_channels": True}


async def test_a_command_the_acl_refuses_is_a_503_problem_and_one_log_line(
    lacking_zrange: tuple[str, str], prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    url, user = lacking_zrange
    client = connect(url)
    settings = Settings(prefix=prefix, partitions=4, redis_url=SecretUrl(url))
    app = create_gateway(client, settings, SECRET)
    session = f"{prefix}-session"
    path = f"/v1/sessions/{session}/messages"
    headers = {"Authorization": f"Bearer {mint(SECRET, session, int(time.time()) + 600)}"}
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    caplog.set_level(logging.ERROR)
    try:
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as http:
            first = await http.get(path, headers=headers)
            again = await http.get(path, headers=headers)
    finally:
        await client.aclose()
    assert (first.status_code, again.status_code) == (503, 503), first.text
    assert first.headers["Retry-After"] == "30"
    assert "ACL" in first.json()["error"]
    lines = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(lines) == 1, lines  # the same refusal again is not logged again within a minute
    for named in (f"'{user}'", "'zrange'", "@sortedset", "grant +zrange"):
        assert named in lines[0]
    assert not any(r.exc_info for r in caplog.records)
    answer = Answer(Probe(503, "GET", MESSAGES, path), first.request, first)
    document = json.loads(OPENAPI.read_bytes())
    assert [m for m in mismatches(document, [answer]) if "no probe obtained" not in m] == []


async def test_each_category_named_is_the_one_redis_gives_its_command(admin_redis: Redis) -> None:
    commands = sorted({name.partition("|")[0] for name in CATEGORIES})
    info = cast(dict[str, Any], await admin_redis.execute_command("COMMAND", "INFO", *commands))  # type: ignore[no-untyped-call]
    before_7 = int((await admin_redis.info("server"))["redis_version"].split(".")[0]) < 7
    for name, category in CATEGORIES.items():
        top, _, sub = name.partition("|")
        if sub:  # a subcommand's categories are its container's: checked through it
            continue
        expected = SINCE_7.get(name, category) if before_7 else category
        assert expected in info[top]["acl_categories"], name

"""The soak's gateway judge: a probe the gateway serves reads Redis, so its 503 while Redis is
away is documented, never a failure (the stream opens answer 503 since they check Redis first)."""

from __future__ import annotations

import asyncio
import random

import httpx

from bench.soak.gateway import Abuser, Catalogue, Followed, Followers


def catalogue() -> Catalogue:
    return Catalogue(b"s" * 32, random.Random(7), lambda: ["soak-1-1", "soak-2-1"])


def test_every_probe_the_gateway_may_serve_is_marked_as_reading_redis() -> None:
    drawn = catalogue()
    for maker in drawn.makers:
        for _ in range(20):
            probe = maker("soak-1-1")
            if probe.expect is not None and 200 in probe.expect and probe.kind != "healthz":
                assert probe.redis, f"{probe.kind} is served from Redis"


async def test_a_stream_opened_while_redis_is_away_is_counted_not_failed() -> None:
    drawn = catalogue()
    async with httpx.AsyncClient() as client:
        abuser = Abuser(client, drawn, random.Random(1))
        abuser._judge(drawn.updates_open("soak-1-1"), 503, b'{"error":"Redis is not reachable"}')
        abuser._judge(drawn.updates_open("soak-1-1"), 500, b"{}")
    assert abuser.redis_away == 1
    assert len(abuser.unexpected) == 1


class SlowToLeave(Followers):
    """A follower whose stream takes a while to close once cancelled, and whose session is over
    at once: its follow is in the middle of waiting for the stream when the soak ends."""

    def _over(self, state: Followed) -> bool:
        return True

    async def _read(self, state: Followed) -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            await asyncio.sleep(0.5)


async def test_a_follower_cancelled_while_its_stream_closes_stops() -> None:
    async with httpx.AsyncClient() as client:
        live = ["soak-1-1"]
        followers = SlowToLeave(client, b"s" * 32, random.Random(1), lambda: live)
        following = asyncio.create_task(followers.run())
        await asyncio.sleep(0.2)  # inside _follow's wait for the closing stream
        following.cancel()
        live.clear()  # a follower that swallowed the cancel idles, to be cancelled at teardown
        done, _ = await asyncio.wait([following], timeout=5)
    assert done, "the follower went on following after it was cancelled"
    assert following.cancelled()

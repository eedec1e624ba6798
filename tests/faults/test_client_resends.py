"""The worker's client never re-sends a command by itself; on a cluster the pump re-reads the slots.

Issue 15, defect 2: a command whose reply was lost may have run, and redis-py's cluster client
re-sends it by default (a command, or the failed part of a pipeline that raises). The network here
runs the command and loses its reply (a proxy drops the connection when the reply comes back). The
worker's client reports the loss and leaves recovery to the pump. As control, a broker made with
FastStream's defaults (what the worker used before) runs it twice on a cluster. On one Redis,
redis-py 8.1's pooled connections already default to no retries; the worker's explicit policy
pins that against a change of default. Each command is a script that counts how often it ran.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from faststream.redis import RedisBroker, RedisClusterBroker
from redis.asyncio import Redis
from redis.exceptions import ConnectionError
from test_failover import promoted

from terminus.service.keys import Keys
from terminus.service.redaction import SecretUrl
from terminus.service.redis.cluster import LocalCluster
from terminus.service.redis.connect import execute, make_broker, refresh_slots
from terminus.service.runtime import wire as wire_module
from terminus.service.runtime.wire import Call, Wire
from terminus.service.settings import Settings
from tests.support.faults.harness import StartRedis, wait_until
from tests.support.faults.proxied import Network, behind_proxies

pytestmark = pytest.mark.cluster

COUNT = "return redis.call('INCR', KEYS[1])"

Send = Callable[[Redis, str], Awaitable[Any]]


async def single(redis: Redis, key: str) -> Any:
    return await redis.eval(COUNT, 1, key)


async def pipelined(redis: Redis, key: str) -> Any:
    """A pipeline that raises on a failed command, as the snapshot loads and the producer send."""
    pipe = redis.pipeline(transaction=False)
    pipe.execute_command("EVAL", COUNT, 1, key)
    (reply,) = await execute(pipe)
    return reply


async def runs_after_a_lost_reply(network: Network, redis: Redis, send: Send, key: str) -> int:
    """Send the counting script once through a network that loses its reply: how often it ran."""
    # A cluster client's first command, before it knows the slots, goes to any node and is
    # redirected (redis-py 8.1): its reply would be the redirect's, not the script's.
    await redis.ping()
    for proxy in network.proxies:  # on a cluster only the key's node sees the marker
        proxy.lose_next_reply(key.encode())
    with contextlib.suppress(ConnectionError):  # lost, and nobody re-sent it: the caller decides
        await send(redis, key)
    check = network.direct.client()
    try:
        return int(await check.get(key) or 0)
    finally:
        await check.aclose()


@pytest.fixture
def counting_script(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pump's wire sends the counting script under any name."""
    monkeypatch.setattr(wire_module, "sha", lambda name: hashlib.sha1(COUNT.encode()).hexdigest())
    monkeypatch.setattr(wire_module, "source", lambda name: COUNT)


@pytest.mark.parametrize("send", [single, pipelined], ids=["command", "pipeline"])
async def test_a_lost_reply_is_reported_not_resent(
    on_cluster: bool, private_redis: StartRedis, tmp_path: Path, send: Send
) -> None:
    async with behind_proxies(on_cluster, private_redis, tmp_path) as network:
        settings = Settings(redis_url=SecretUrl(network.workers.url), redis_cluster=on_cluster)
        broker = make_broker(settings)
        worker_client = await broker.connect()
        defaults = (RedisClusterBroker if on_cluster else RedisBroker)(network.workers.url)
        library_default = await defaults.connect()
        try:
            assert await runs_after_a_lost_reply(network, worker_client, send, "{0}worker") == 1
            # The control: the library's default policy runs it again (so the test can fail).
            ran = await runs_after_a_lost_reply(network, library_default, send, "{0}default")
            assert ran == (2 if on_cluster else 1), f"a default client ran it {ran} times"
            # The pump's recovery on a cluster: re-read the slots, then the next round goes on.
            assert await refresh_slots(worker_client)
            assert await send(worker_client, "{0}worker") == 2
        finally:
            await defaults.stop()
            await broker.stop()


async def test_every_worker_and_gateway_client_is_configured_without_resends() -> None:
    """What the behaviour above rests on, for each kind of broker the service makes."""
    for cluster in (False, True):
        settings = msgspec.structs.replace(Settings(), redis_cluster=cluster)
        for name in ("terminus-worker", "terminus-gateway"):
            options = make_broker(settings, name).config.broker_config.connection._options
            assert options["retry"].get_retries() == 0, (cluster, name)


async def round_reply(wire: Wire, call: Call) -> Any:
    """The call's reply in a pump round of its own; a connection error as the pump sees it,
    whether the round raised it or returned it in the call's place."""
    try:
        (reply,) = (await wire.send([call])).replies
    except ConnectionError as exc:
        return exc
    return reply


@pytest.mark.usefixtures("counting_script")
async def test_after_a_failover_the_pump_s_round_goes_to_the_promoted_replica(
    tmp_path: Path,
) -> None:
    """With no retries, redis-py's cluster pipeline never re-reads the slot map by itself: the
    rounds would keep going to the dead primary. `Wire.recover` (the pump's start-over) does."""
    with LocalCluster(tmp_path / "cluster") as cluster:
        broker = make_broker(Settings(redis_url=SecretUrl(cluster.url), redis_cluster=True))
        redis = await broker.connect()
        # Named "commit", the call is followed by WAIT 1: the replica has each count.
        wire = Wire(redis, msgspec.structs.replace(Settings(), commit_wait_replicas=1))
        key = Keys(0, "failover").root
        call: Call = ("commit", [key], [])
        try:
            assert await round_reply(wire, call) == 1
            victim = cluster.primary_of(key)
            victim.kill()
            await wait_until(lambda: promoted(cluster, key, victim), "a promotion", 30)
            lost = await round_reply(wire, call)
            assert isinstance(lost, ConnectionError), lost  # reported, not re-sent elsewhere
            again = await round_reply(wire, call)
            assert isinstance(again, ConnectionError), "the stale map still names the dead node"
            # As the pump does: each failed round is followed by a refresh. The node asked may
            # not know of the promotion yet (gossip), so it may take more than one.
            replies: list[Any] = [again]

            async def counted() -> bool:
                await wire.recover(replies[-1])
                replies.append(await round_reply(wire, call))
                return not isinstance(replies[-1], ConnectionError)

            await wait_until(counted, "a round on the promoted replica", 30)
            assert replies[-1] == 2, replies  # the promoted replica had the first count
        finally:
            await wire.close()
            await broker.stop()

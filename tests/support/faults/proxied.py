"""A private Redis Cluster whose every client connection goes through a `BlackholeProxy`.

Each node announces its proxy's port (`cluster-announce-port`), so CLUSTER SLOTS and MOVED send
clients to the proxies, never to the nodes themselves; the cluster bus stays direct. No replicas:
the tests that use it cut the network, not a node. Unlike the session's cluster (tests/conftest.py)
it is started per test, as blackholing it would stall every other test's traffic.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import NamedTuple

from terminus.service.redis.cluster import LocalCluster
from tests.support.backends import Target
from tests.support.faults.harness import StartRedis
from tests.support.faults.proxy import BlackholeProxy


@asynccontextmanager
async def proxied_cluster(
    data_dir: Path,
) -> AsyncIterator[tuple[LocalCluster, list[BlackholeProxy]]]:
    """3 primaries, each behind its own proxy: clients start from any proxy's URL."""
    cluster = LocalCluster(data_dir, replicas=0)
    async with AsyncExitStack() as stack:
        proxies = [await stack.enter_async_context(BlackholeProxy(n.port)) for n in cluster.nodes]
        for node, proxy in zip(cluster.nodes, proxies, strict=True):
            node.announce_port = proxy.port
        # In a thread: `redis-cli --cluster create` reaches the nodes through the proxies, which
        # run on this event loop.
        await asyncio.to_thread(cluster.start)
        try:
            yield cluster, proxies
        finally:
            await asyncio.to_thread(cluster.stop)


class Network(NamedTuple):
    """Where a test's own client goes, where its workers go, and the proxies on the way."""

    direct: Target
    workers: Target
    proxies: list[BlackholeProxy]

    async def blackhole(self, seconds: float) -> None:
        """Forward nothing through any proxy for `seconds`."""
        await asyncio.gather(*(proxy.blackhole(seconds) for proxy in self.proxies))


@asynccontextmanager
async def behind_proxies(
    on_cluster: bool, private_redis: StartRedis, tmp_path: Path
) -> AsyncIterator[Network]:
    """One redis-server behind one proxy that only the workers use; or a proxied cluster, which
    the test's client reaches through the proxies too (the nodes announce no other address)."""
    if on_cluster:
        async with proxied_cluster(tmp_path / "cluster") as (_, proxies):
            target = Target(proxies[0].url, cluster=True)
            yield Network(target, target, proxies)
        return
    server = private_redis()
    async with BlackholeProxy(server.port) as proxy:
        yield Network(Target(server.url, False), Target(proxy.url, False), [proxy])

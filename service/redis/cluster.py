"""A local Redis Cluster of child processes, for tests and bench: 3 primaries + 3 replicas.

Each node is an `EmbeddedRedis` (127.0.0.1, a free port, AOF in its own directory) started with
`cluster-enabled yes` and a short `cluster-node-timeout`, so a killed primary's replica is
promoted within a few seconds. `redis-cli --cluster create` assigns the slots and the replicas;
`start` returns once every node reports `cluster_state:ok`, every slot is served and every
replica has synced with its primary.

    with LocalCluster(tmp_dir) as cluster:   # cluster.url names one node: any node will do
        ...
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self, cast

import redis

from terminus.service.redis.embedded import EmbeddedRedis, EmbeddedRedisError, can_bind, free_port

SLOTS: Final = 16384
NODE_TIMEOUT_MS: Final = 1000
BUS_OFFSET: Final = 10_000  # a node's cluster bus listens on its port + 10000


def node_port() -> int:
    """A free port whose cluster bus port (+10000) is free and valid too."""
    while True:
        port = free_port()
        if port + BUS_OFFSET < 65536 and can_bind(port + BUS_OFFSET):
            return port


class ClusterNode(EmbeddedRedis):
    """One cluster-enabled redis-server; its cluster state lives in `data_dir/nodes.conf`."""

    node_timeout_ms = NODE_TIMEOUT_MS  # silence after which the others fail it over
    # The port the node tells clients to use (CLUSTER SLOTS, MOVED): a proxy's, so that a test
    # can cut every client connection (tests/support/faults/proxy.py); its own port when None.
    announce_port: int | None = None

    def command(self) -> list[str]:
        return [
            *super().command(),
            *("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"),
            *("--cluster-node-timeout", str(self.node_timeout_ms)),
            # A cluster that lost a shard still serves the others' slots (and reports it).
            *("--cluster-require-full-coverage", "no"),
            *self._announce(),
        ]

    def _free_port(self) -> int:
        return node_port()  # its bus port (+10000) must be free too

    def probe(self) -> redis.Redis:
        """A short-lived client of this node alone, for the cluster's own checks."""
        return redis.Redis(port=self.port, socket_timeout=1, socket_connect_timeout=1)

    def _announce(self) -> list[str]:
        if self.announce_port is None:
            return []
        # The bus (node to node) stays direct: only client traffic goes through the proxy.
        bus = str(self.port + BUS_OFFSET)
        return [
            *("--cluster-announce-ip", "127.0.0.1"),
            *("--cluster-announce-port", str(self.announce_port)),
            *("--cluster-announce-bus-port", bus),
        ]


class LocalCluster:
    """`primaries` shards of one primary and `replicas` replicas each, on loopback ports."""

    def __init__(
        self,
        data_dir: Path,
        *,
        primaries: int = 3,
        replicas: int = 1,
        node_timeout_ms: int = NODE_TIMEOUT_MS,
        timeout: float = 30.0,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        count = primaries * (1 + replicas)
        self.nodes = [self._node(self.data_dir / f"node-{n}") for n in range(count)]
        for node in self.nodes:
            node.node_timeout_ms = node_timeout_ms
        self.replicas = replicas
        self.timeout = timeout

    def _node(self, data_dir: Path) -> ClusterNode:
        return ClusterNode(data_dir)

    @property
    def url(self) -> str:
        """A URL naming one node; the cluster client discovers the rest."""
        return self.nodes[0].url

    def start(self) -> Self:
        """Start every node, join them into one cluster, wait until every slot is served."""
        try:
            for node in self.nodes:
                node.start()
            self._create()
            self.wait_ok()
        except BaseException:
            self.stop()
            raise
        return self

    def _create(self) -> None:
        cli = shutil.which("redis-cli")
        if cli is None:
            raise EmbeddedRedisError("redis-cli is not on PATH: it creates the cluster")
        addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
        argv = [cli, "--cluster", "create", *addresses]
        argv += ["--cluster-replicas", str(self.replicas), "--cluster-yes"]
        done = subprocess.run(argv, capture_output=True, timeout=self.timeout, check=False)
        if done.returncode != 0:
            raise EmbeddedRedisError(f"redis-cli --cluster create failed: {done.stdout!r}")

    def wait_ok(self) -> None:
        """Return once every running node says cluster_state:ok, all slots are served and every
        replica's link to its primary is up."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if all(self._node_ok(node) for node in self.nodes if node.running):
                return
            time.sleep(0.05)
        raise EmbeddedRedisError(f"the cluster in {self.data_dir} did not become ok in time")

    @staticmethod
    def _node_ok(node: ClusterNode) -> bool:
        client = node.probe()
        try:
            info = _command(client, "CLUSTER INFO")  # parsed by redis-py into a dict
            if info["cluster_state"] != "ok" or int(info["cluster_slots_ok"]) != SLOTS:
                return False
            # A replica that has not synced yet could not take over: wait for its link too.
            replication = client.info("replication")
            return bool(
                replication["role"] == "master" or replication["master_link_status"] == "up"
            )
        except redis.RedisError:
            return False
        finally:
            client.close()

    def primary_of(self, key: str) -> ClusterNode:
        """The node serving `key`'s slot now."""
        for node in self.nodes:
            if not node.running:
                continue
            with contextlib.closing(node.probe()) as client:
                role = _command(client, "ROLE")[0]
                slot = _command(client, "CLUSTER KEYSLOT", key)
                if role == b"master" and _serves(client, int(slot), node.port):
                    return node
        raise EmbeddedRedisError(f"no running primary serves {key!r}")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def _command(client: redis.Redis, *args: object) -> Any:
    return cast(Any, client).execute_command(*args)


def _serves(client: redis.Redis, slot: int, port: int) -> bool:
    for start, end, primary, *_ in _command(client, "CLUSTER SLOTS"):
        if start <= slot <= end:
            return int(primary[1]) == port
    return False

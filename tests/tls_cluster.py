"""A local Redis Cluster that speaks TLS only, signed by a private CA and wanting client
certificates: 3 primaries, no replicas, on free loopback ports (issue 31, item 7).

The nodes are `ClusterNode`s (service/redis/cluster.py) with the TLS directives of
tests/secure_redis.py, and `tls-cluster yes` so that the cluster bus is TLS too. The cluster is
joined with CLUSTER ADDSLOTS and CLUSTER MEET over TLS, not `redis-cli --cluster create`, whose
TLS flags differ between versions.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self, cast
from urllib.parse import quote, urlencode

import redis
from secure_redis import NO_TLS_SIGNS, Certs, make_certs

from terminus.service.redis.cluster import SLOTS, ClusterNode, node_port
from terminus.service.redis.embedded import EmbeddedRedisError

PRIMARIES: Final = 3


class TlsClusterNode(ClusterNode):
    """A cluster node on TLS only (`port` is its tls-port), client certificates required."""

    def __init__(self, data_dir: Path, certs: Certs) -> None:
        super().__init__(data_dir, port=node_port())
        self.certs = certs

    def command(self) -> list[str]:
        certs = self.certs
        return [
            *super().command(),
            *("--port", "0", "--tls-port", str(self.port), "--tls-cluster", "yes"),
            *("--tls-cert-file", str(certs.server_cert), "--tls-key-file", str(certs.server_key)),
            *("--tls-ca-cert-file", str(certs.ca), "--tls-auth-clients", "yes"),
            # On the bus a node is a client of the others: it shows a client certificate.
            *("--tls-client-cert-file", str(certs.client_cert)),
            *("--tls-client-key-file", str(certs.client_key)),
        ]

    def probe(self) -> redis.Redis:
        return redis.Redis(
            port=self.port, socket_timeout=1, socket_connect_timeout=1, **tls_options(self.certs)
        )


def tls_options(certs: Certs) -> dict[str, Any]:
    """redis-py's keyword arguments for a verified TLS connection with a client certificate."""
    return {
        "ssl": True,
        "ssl_ca_certs": str(certs.ca),
        "ssl_certfile": str(certs.client_cert),
        "ssl_keyfile": str(certs.client_key),
    }


class TlsCluster:
    """`PRIMARIES` TLS nodes joined into one cluster; `url` is what REDIS_URL would say."""

    def __init__(self, data_dir: Path, timeout: float = 30.0) -> None:
        self.certs = make_certs(data_dir / "tls")
        self.nodes = [TlsClusterNode(data_dir / f"node-{n}", self.certs) for n in range(PRIMARIES)]
        self.timeout = timeout

    @property
    def url(self) -> str:
        """`rediss://127.0.0.1:port/0?ssl_ca_certs=...&ssl_certfile=...&ssl_keyfile=...`."""
        options = tls_options(self.certs)
        query = urlencode(
            {k: v for k, v in options.items() if k != "ssl"}, quote_via=quote, safe="/"
        )
        return f"rediss://127.0.0.1:{self.nodes[0].port}/0?{query}"

    def lacks_tls(self) -> bool:
        """Whether redis-server was built without TLS (after a failed start)."""
        logs = (n.log_path.read_text(errors="replace") for n in self.nodes if n.log_path.exists())
        return any(sign in log for log in logs for sign in NO_TLS_SIGNS)

    def start(self) -> Self:
        try:
            for node in self.nodes:
                node.start()
            self._join()
            self._wait_ok()
        except BaseException:
            self.stop()
            raise
        return self

    def _join(self) -> None:
        share = SLOTS // PRIMARIES + 1
        for n, node in enumerate(self.nodes):
            with contextlib.closing(node.probe()) as client:
                slots = range(n * share, min(SLOTS, (n + 1) * share))
                _command(client, "CLUSTER", "ADDSLOTS", *slots)
                for other in self.nodes[n + 1 :]:
                    _command(client, "CLUSTER", "MEET", "127.0.0.1", other.port)

    def _wait_ok(self) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if all(self._node_ok(node) for node in self.nodes):
                return
            time.sleep(0.05)
        raise EmbeddedRedisError("the TLS cluster did not become ok in time")

    @staticmethod
    def _node_ok(node: TlsClusterNode) -> bool:
        with contextlib.closing(node.probe()) as client:
            try:
                info = _command(client, "CLUSTER INFO")
            except redis.RedisError:
                return False
            return bool(info["cluster_state"] == "ok" and int(info["cluster_slots_ok"]) == SLOTS)

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

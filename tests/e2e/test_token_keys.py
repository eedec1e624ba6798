"""Token keys that do not move with the shell (issue 31, item 3): `terminus token` run from any
directory mints a token the gateway accepts, and the key they share is made once, announced on
stderr with its path, in the state directory and never in the working directory.

Before, `terminus token` run from another directory made a second `./var/token-secret` there
without a word and minted tokens the gateway answered with `401 bad signature`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import httpx
import pytest

from terminus.service.redis.embedded import free_port

KEY_VARS: Final = ("TERMINUS_TOKEN_SECRETS", "TERMINUS_TOKEN_KEYS_FILE", "TERMINUS_TOKEN_SECRET")


def user_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a user whose home is `home` and who set no token key."""
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARS}
    for name in ("TERMINUS_STATE_DIR", "XDG_STATE_HOME"):
        env.pop(name, None)
    return {**env, "HOME": str(home), **extra}


def terminus(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "terminus", *args]
    return subprocess.run(
        command, env=env, cwd=cwd, capture_output=True, text=True, timeout=60, check=True
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


@pytest.fixture
def gateway(
    single_redis_url: str, prefix: str, home: Path, tmp_path: Path
) -> Iterator[tuple[str, Path]]:
    """A `terminus gateway` started from its own directory; its URL and its log."""
    where = tmp_path / "repository"
    where.mkdir()
    port = free_port()
    env = user_env(home, REDIS_URL=single_redis_url, TERMINUS_PREFIX=prefix)
    log = tmp_path / "gateway.log"
    with log.open("wb") as out:
        command = [sys.executable, "-m", "terminus", "gateway", "--http", f"127.0.0.1:{port}"]
        process = subprocess.Popen(command, env=env, cwd=where, stdout=out, stderr=out)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while not _healthy(url):
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the gateway never answered /healthz"
            time.sleep(0.1)
        yield url, log
    finally:
        process.terminate()
        process.wait(30)


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def test_a_token_minted_in_another_directory_is_accepted(
    gateway: tuple[str, Path], home: Path, tmp_path: Path
) -> None:
    url, _ = gateway
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    token = terminus(user_env(home), elsewhere, "token", "s1").stdout.strip()
    answer = httpx.get(
        f"{url}/v1/sessions/s1/messages",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    assert list(elsewhere.iterdir()) == []


def test_the_gateway_announces_the_key_it_made(gateway: tuple[str, Path], home: Path) -> None:
    _, log = gateway
    path = home / ".local" / "state" / "terminus" / "token-keys"
    assert path.exists()
    assert f"created a token key in {path}" in log.read_text()


def test_making_a_key_is_announced_once_with_its_path(home: Path, tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    env = user_env(home, XDG_STATE_HOME=str(tmp_path / "xdg"))
    made = terminus(env, first, "token", "s1")
    path = tmp_path / "xdg" / "terminus" / "token-keys"
    assert made.stderr.count("created a token key") == 1
    assert str(path) in made.stderr
    again = terminus(env, second, "token", "--admin")
    assert again.stderr == ""
    assert list(first.iterdir()) == list(second.iterdir()) == []
    assert made.stdout.split(".")[1] == again.stdout.split(".")[1] == "default"


def test_run_announces_the_key_before_the_demo_and_once(
    single_redis_url: str, prefix: str, home: Path, tmp_path: Path
) -> None:
    """`terminus run` makes the key itself, before its gateway starts: one line, ahead of the
    demo's story rather than in the middle of it."""
    port = free_port()
    env = user_env(
        home, REDIS_URL=single_redis_url, TERMINUS_PREFIX=prefix, TERMINUS_PARTITIONS="4"
    )
    command = [sys.executable, "-m", "terminus", "run", "--demo", "--once", "--workers", "1"]
    log = tmp_path / "run.log"
    with log.open("wb") as out:
        done = subprocess.run(
            [*command, "--http", f"127.0.0.1:{port}"],
            env=env,
            cwd=tmp_path,
            stdout=out,
            stderr=out,
            timeout=120,
            check=False,
        )
    said = log.read_text()
    assert done.returncode == 0, said
    assert said.count("created a token key") == 1, said
    assert said.index("created a token key") < said.index("[1] complete answer"), said

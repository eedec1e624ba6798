"""The deployable shape: the Dockerfile builds the installed package into a non-root image with
a healthcheck, and docker-compose.yml runs it (Redis with AOF, workers, the gateway's port)
without mounting the source or installing at start. No Docker engine runs here: Debian's
`docker-compose config` validates the compose file, and is skipped with one line without it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
COMPOSE = ROOT / "docker-compose.yml"


def instructions(keyword: str) -> list[str]:
    return [line for line in DOCKERFILE.splitlines() if line.startswith(keyword + " ")]


def test_the_image_runs_as_a_user_with_a_healthcheck_and_installs_at_build_time() -> None:
    assert instructions("USER") == ["USER terminus"]
    assert len(instructions("HEALTHCHECK")) == 1
    assert instructions("FROM")[-1] == "FROM python:3.11-slim"
    assert any("pip install" in line for line in instructions("RUN"))
    assert instructions("ENTRYPOINT") == ['ENTRYPOINT ["terminus"]']


def test_the_image_holds_what_the_wheel_needs_and_no_tests() -> None:
    copied = {line.split()[1] for line in instructions("COPY") if "--from" not in line}
    assert {"service", "events", "statemachines", "pyproject.toml"} <= copied
    assert "tests" in (ROOT / ".dockerignore").read_text().split()


def compose_config() -> str:
    tool = shutil.which("docker-compose")
    if tool is None:
        pytest.skip("no docker-compose here (Debian's docker-compose validates the file)")
    env = {**os.environ, "TERMINUS_TOKEN_SECRET": "x" * 32}
    done = subprocess.run(
        [tool, "-f", str(COMPOSE), "config"], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_docker_compose_validates_the_file() -> None:
    config = compose_config()
    for service in ("redis:", "worker:", "gateway:", "demo:"):
        assert f"  {service}" in config
    assert "appendonly" in config
    assert "8080" in config


def test_nothing_is_mounted_or_installed_at_start() -> None:
    text = COMPOSE.read_text()
    assert ".:/app" not in text
    assert "pip install" not in text
    assert "build: ." in text


def test_the_token_secret_must_be_set() -> None:
    tool = shutil.which("docker-compose")
    if tool is None:
        pytest.skip("no docker-compose here (Debian's docker-compose validates the file)")
    env = {k: v for k, v in os.environ.items() if k != "TERMINUS_TOKEN_SECRET"}
    done = subprocess.run(
        [tool, "-f", str(COMPOSE), "config"], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode != 0
    assert "TERMINUS_TOKEN_SECRET" in done.stderr

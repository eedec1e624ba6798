"""The README's producer and frontend, run as written. Each python block of README.md under a
`<!-- tested as written: tests/e2e/test_readme_snippets.py (NAME) -->` line is saved as NAME.py
and run as the README says: beside `terminus run` (real worker processes and the gateway) on a
private Redis, under the default prefix and partitions, with only the variables the README names
(`REDIS_URL`, `ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`, `TERMINUS_SESSION_TOKEN` from
`terminus token s1`, `TERMINUS_GATEWAY_URL`). The producer's provider is a local fake that cuts
the first answer and sends the second whole, so the frontend sees an attempt discarded. A broken
snippet (a renamed export, a changed signature, a missing await) fails here."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Final

import httpx

from terminus.service.redis.embedded import EmbeddedRedis, free_port
from tests.support.fake_provider import Reply, fake_provider
from tests.support.polling import until

ROOT: Final = Path(__file__).parents[2]
MARK: Final = re.compile(
    r"<!-- tested as written: tests/e2e/test_readme_snippets\.py \((\w+)\) -->\n"
    r"```python\n(.*?)```",
    re.DOTALL,
)
ANTHROPIC: Final = ROOT / "tests/fixtures/provider-streams/anthropic"
ANSWER: Final = (ANTHROPIC / "text-basic-ping-sdk-python.sse").read_bytes().rstrip(b"\n") + b"\n\n"
SSE: Final = {"content-type": "text/event-stream"}
DEADLINE_S: Final = 120.0  # generous: a loaded 2-core machine starts Python slowly


def snippets() -> dict[str, str]:
    """The README's marked python blocks, by name."""
    return dict(MARK.findall((ROOT / "README.md").read_text("utf-8")))


def clean_env(**names: str) -> dict[str, str]:
    """This environment without any terminus or Redis setting (the README's reader has none),
    plus `names`."""
    kept = {
        k: v for k, v in os.environ.items() if not k.startswith("TERMINUS_") and k != "REDIS_URL"
    }
    return {**kept, **names}


async def run(args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *args,
        env=env,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), DEADLINE_S)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@contextlib.asynccontextmanager
async def terminus_run(env: dict[str, str], cwd: Path, port: int) -> AsyncIterator[None]:
    """`terminus run` with one worker and the gateway on `port`, stopped by Ctrl-C at the end."""
    with (cwd / "run.out").open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            *terminus("run", "--workers", "1", "--http", f"127.0.0.1:{port}"),
            env=env,
            cwd=cwd,
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
        )
    try:
        await until(lambda: _healthy(port), "the gateway of terminus run", DEADLINE_S)
        yield
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGINT)
        try:
            await asyncio.wait_for(proc.wait(), DEADLINE_S)
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def _healthy(port: int) -> bool:
    try:
        async with httpx.AsyncClient(timeout=2) as client:
            answer = await client.get(f"http://127.0.0.1:{port}/healthz")
    except httpx.TransportError:
        return False
    return answer.status_code == 200


def test_the_readme_marks_its_producer_and_its_frontend() -> None:
    assert sorted(snippets()) == ["frontend", "producer"]


async def test_the_readme_producer_and_frontend_run_as_written(
    private_redis: Callable[..., EmbeddedRedis], tmp_path: Path
) -> None:
    for name, code in snippets().items():
        (tmp_path / f"{name}.py").write_text(code)
    env = clean_env(REDIS_URL=private_redis().url, TERMINUS_TOKEN_SECRET=secrets.token_hex(16))
    port = free_port()
    cut = Reply(200, ANSWER, SSE, cut_at=ANSWER.index(b"content_block_stop"))
    async with (
        terminus_run(env, tmp_path, port),
        fake_provider([cut, Reply(200, ANSWER, SSE)]) as fake,
    ):
        status, token, err = await run(terminus("token", "s1"), env, tmp_path)
        assert status == 0, err
        gateway = {"TERMINUS_SESSION_TOKEN": token.strip()}
        gateway["TERMINUS_GATEWAY_URL"] = f"http://127.0.0.1:{port}"
        provider = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": fake.url}
        (f_status, f_out, f_err), (p_status, p_out, p_err) = await asyncio.gather(
            run([sys.executable, "frontend.py"], env | gateway, tmp_path),
            run([sys.executable, "producer.py"], env | provider, tmp_path),
        )
    assert (p_status, p_err) == (0, "")
    assert (f_status, f_err) == (0, "")
    answer = p_out.splitlines()
    assert len(answer) == 1, p_out
    assert answer[0], p_out
    lines = f_out.splitlines()
    kinds = [line.split(" ", 1)[0] for line in lines]
    assert "attempt_discarded" in kinds, f_out
    assert lines[-1] == f"turn_finished {answer[0]!r}", f_out
    assert len(fake.requests) == 2


def terminus(*args: str) -> list[str]:
    return [sys.executable, "-m", "terminus", *args]

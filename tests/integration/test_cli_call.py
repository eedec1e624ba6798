"""`terminus call`: the turn runner on the command line, against a fake provider over HTTP and a
real worker. Frames are printed as they commit, then the message (exit 0) or the error (exit 1)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from serving import running_worker

from terminus.service.settings import Settings
from tests.support.fake_provider import Reply, fake_provider
from tests.support.faults.malformed import beside
from tests.support.polling import until

ANTHROPIC = Path(__file__).parents[1] / "fixtures/provider-streams/anthropic"
ANSWER = (ANTHROPIC / "text-basic-ping-sdk-python.sse").read_bytes().rstrip(b"\n") + b"\n\n"
SSE = {"content-type": "text/event-stream"}
REQUEST = {"model": "claude-x", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}


async def call(
    redis: Redis,
    prefix: str,
    tmp_path: Path,
    replies: list[Reply],
    turn: str,
    session: str = "s-call",
    stdin: bytes | None = None,
) -> tuple[int, list[dict[str, Any]], bytes]:
    """Run `terminus call` beside a worker; its exit status, its JSON lines and its stderr. With
    `stdin`, the request is `-` and `stdin` is piped to it."""
    request = tmp_path / "request.json"
    request.write_text(json.dumps(REQUEST))
    settings = Settings(prefix=prefix, partitions=4, block_ms=100)
    async with running_worker(redis, settings), fake_provider(replies) as provider:
        proc = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "terminus", "call", "--provider", "anthropic"),
            *("--base-url", provider.url, "--session", session, "--turn", turn),
            "-" if stdin is not None else str(request),
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "ANTHROPIC_API_KEY": "test-key"},
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(stdin), 60)
        finally:  # a call that hangs (issue 30) must not outlive the test
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, [json.loads(line) for line in out.splitlines()], err


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, redis_env: None, prefix: str) -> None:
    monkeypatch.setenv("TERMINUS_PREFIX", prefix)
    monkeypatch.setenv("TERMINUS_PARTITIONS", "4")


@pytest.mark.usefixtures("cli_env")
async def test_a_cut_then_a_whole_answer_prints_the_discard_and_the_message(
    redis: Redis, prefix: str, tmp_path: Path
) -> None:
    cut = Reply(200, ANSWER, SSE, cut_at=ANSWER.index(b"there"))
    status, lines, err = await call(redis, prefix, tmp_path, [cut, Reply(200, ANSWER, SSE)], "t-ok")
    assert status == 0, err
    kinds = [line.get("sessionUpdate") for line in lines[:-1]]
    assert kinds.count("attempt_discarded") == 1
    assert kinds[-1] == "turn_finished"
    assert lines[-1]["message_id"] == "msg-t-ok"
    assert b"test-key" not in err


@pytest.mark.usefixtures("cli_env")
async def test_a_request_body_read_from_stdin_with_dash(
    redis: Redis, prefix: str, tmp_path: Path
) -> None:
    """`terminus call ... -`: the body comes from stdin, as the help says, and the turn runs."""
    body = {**REQUEST, "messages": [{"role": "user", "content": "from stdin"}]}
    replies = [Reply(200, ANSWER, SSE)]
    status, lines, err = await call(
        redis, prefix, tmp_path, replies, "t-stdin", stdin=json.dumps(body).encode()
    )
    assert status == 0, err
    assert lines[-1]["message_id"] == "msg-t-stdin"
    assert err == b""


@pytest.mark.usefixtures("cli_env")
async def test_a_body_on_stdin_that_is_not_an_object_exits_1_naming_stdin(
    redis: Redis, prefix: str, tmp_path: Path
) -> None:
    status, lines, err = await call(redis, prefix, tmp_path, [], "t-bad", stdin=b"[1, 2]")
    assert status == 1
    assert lines == []
    assert err.decode().strip() == "terminus call: stdin: the request body must be a JSON object"


def test_the_help_says_what_the_request_argument_reads() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "terminus", "call", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "or - to read it from stdin" in " ".join(done.stdout.split())


@pytest.mark.usefixtures("cli_env")
async def test_a_budget_error_exits_1_with_the_error_json(
    redis: Redis, prefix: str, tmp_path: Path
) -> None:
    headers = {"content-type": "application/json", "x-llm-error-type": "budget"}
    spent = Reply(402, b'{"error": {"message": "budget spent"}}', headers)
    status, lines, err = await call(redis, prefix, tmp_path, [spent], "t-402")
    assert status == 1, err
    assert lines[-2]["sessionUpdate"] == "agent_error"
    error = lines[-1]["error"]
    assert (error["type"], error["retryable"], error["status"]) == ("budget", False, 402)


@pytest.mark.usefixtures("cli_env")
async def test_ctrl_c_during_a_call_exits_130_without_a_traceback(tmp_path: Path) -> None:
    """Issue 30: Ctrl-C while the provider streamed printed the traceback of the frame printer,
    cut off as the command closed its Redis client under it."""
    request = tmp_path / "request.json"
    request.write_text(json.dumps(REQUEST))
    held = Reply(200, ANSWER[: ANSWER.index(b"there")], SSE, hold=True)
    async with fake_provider([held]) as provider:
        proc = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "terminus", "call", "--provider", "anthropic"),
            *("--base-url", provider.url, "--session", "s-ctrl-c", str(request)),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "ANTHROPIC_API_KEY": "test-key"},
        )

        async def asked() -> bool:
            return bool(provider.requests)

        await until(asked, "the call's request to the provider")
        proc.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(proc.communicate(), 60)
        provider.release()
    assert proc.returncode == 130, err.decode()
    assert err == b"", err.decode()


@pytest.mark.usefixtures("cli_env")
async def test_a_finished_turn_of_another_session_exits_1_refused(
    redis: Redis, prefix: str, tmp_path: Path
) -> None:
    """Issue 30: `terminus call --session B --turn <A's finished turn>` once hung with nothing
    logged; the workers now refuse the entries and the runner says so."""
    status, _, err = await call(redis, prefix, tmp_path, [Reply(200, ANSWER, SSE)], "t-mine")
    assert status == 0, err
    other = beside("s-call", 4, "s-other")  # same partition: its workers know t-mine
    status, lines, err = await call(
        redis, prefix, tmp_path, [Reply(200, ANSWER, SSE)], "t-mine", session=other
    )
    assert status == 1, err
    assert lines == [
        {
            "error": {
                "type": "refused",
                "turn_id": "t-mine",
                "reason": f"turn t-mine is not a turn of session {other}",
            }
        }
    ]

"""`terminus run` with TERMINUS_TRACES=1 (issue 36): beside its worker it runs `terminus
traces`, which exports a turn's spans over OTLP/HTTP once the worker has it end."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Final

from redis.asyncio import Redis

from bench.common.otlp_receiver import running_receiver
from terminus.service.cli.feeding import publish_attempt
from terminus.service.sdk.producer import Producer

FIXTURES: Final = Path(__file__).parent.parent / "fixtures" / "provider-streams" / "anthropic"
CUT: Final = FIXTURES / "text-basic-ping-sdk-python.sse"
TEXT: Final = FIXTURES / "text-recorded-fantasy.sse"
PARTITIONS: Final = 4


async def test_run_with_traces_exports_each_turn_as_it_ends(
    single_redis_url: str, tmp_path: Path
) -> None:
    prefix = f"t-{uuid.uuid4().hex}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TERMINUS_"))}
    env |= {"REDIS_URL": single_redis_url, "TERMINUS_PREFIX": prefix, "TERMINUS_TRACES": "1"}
    env |= {"TERMINUS_PARTITIONS": str(PARTITIONS), "TERMINUS_STATE_DIR": str(tmp_path)}
    redis = Redis.from_url(single_redis_url)
    with running_receiver() as receiver, (tmp_path / "err").open("wb") as err:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.endpoint
        command = [sys.executable, "-m", "terminus", "run", "--workers", "1", "--no-http"]
        process = subprocess.Popen(command, cwd=tmp_path, env=env, stderr=err)
        try:
            turn = Producer(redis, partitions=PARTITIONS, prefix=prefix).turn("s-run", "t-run")
            await turn.start()
            await publish_attempt(turn, CUT, "anthropic", attempt=1)
            await publish_attempt(turn, TEXT, "anthropic", attempt=2)
            deadline = time.monotonic() + 60
            while len(receiver.spans()) < 3 and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(30)
            keys = [k async for k in redis.scan_iter(match=f"{prefix}:*")]
            if keys:
                await redis.unlink(*keys)
            await redis.aclose()
    stderr = (tmp_path / "err").read_text()
    assert "exporting spans of every turn" in stderr
    names = [span.name for span in receiver.spans()]
    assert names == ["invoke_agent", "chat", "chat"], stderr

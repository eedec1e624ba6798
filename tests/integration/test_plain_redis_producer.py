"""A producer in another language: docs/examples/publish-turn.sh publishes a turn with plain
redis-cli commands, as the AsyncAPI document describes the inbound log, and the workers persist
its answer (issue "Adopted in an afternoon (2/2)", item 6)."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest
from redis.asyncio import Redis
from serving import running_worker

from terminus.events.outbound import TextPart
from terminus.service.keys import Keys, partition_of
from terminus.service.sdk.views import session_messages
from terminus.service.settings import Settings
from tests.support.polling import until

SCRIPT = Path(__file__).parents[2] / "docs" / "examples" / "publish-turn.sh"
PARTITIONS = 16


async def test_a_turn_published_with_redis_cli_is_persisted(
    redis: Redis, redis_url: str, prefix: str
) -> None:
    if shutil.which("redis-cli") is None:
        pytest.skip("no redis-cli on PATH")
    if not redis_url.startswith("redis://"):
        pytest.skip("the example passes plain redis:// options to redis-cli")
    session = "shell-session-\u00e9"  # a non-ASCII id: its UTF-8 bytes are what CRC-32 reads
    settings = Settings(prefix=prefix, partitions=PARTITIONS, block_ms=100)
    async with running_worker(redis, settings):
        proc = await asyncio.create_subprocess_exec(
            "bash",
            str(SCRIPT),
            session,
            "t-shell",
            str(PARTITIONS),
            prefix,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "REDIS_CLI_ARGS": f"-u {redis_url}"},
        )
        out, err = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 0, err
        assert out.decode().strip() == Keys(partition_of(session, PARTITIONS), prefix).inbound

        async def persisted() -> bool:
            found = await session_messages(redis, session, partitions=PARTITIONS, prefix=prefix)
            return bool(found)

        await until(persisted, "the shell turn persisted")
    [message] = await session_messages(redis, session, partitions=PARTITIONS, prefix=prefix)
    assert message.turn_id == "t-shell"
    assert [p.text for p in message.parts if isinstance(p, TextPart)] == ["Hello from redis-cli"]

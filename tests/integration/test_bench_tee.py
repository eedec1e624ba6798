"""The tee's benchmark (bench/tee) streams what it says: each answer it makes is one the
provider's adapter proves finished with all of its text, and a run each way reads that text
through the real SDK, teed into a turn the workers conclude with the same text."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.asyncio import Redis
from serving import running_worker

from bench.tee import serve
from bench.tee.__main__ import summary
from bench.tee.answers import ANSWERS
from bench.tee.measure import WAYS, Rig, compare
from terminus.service.cli.simulate import simulate
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.runner import TurnRunner
from terminus.service.settings import Settings
from tests.support.sdk_clients import SDK_CLIENTS

PARTITIONS = 4
DELTAS = 40


@pytest.mark.parametrize("name", list(ANSWERS))
def test_each_answer_is_a_finished_stream_of_its_text(name: str, tmp_path: Path) -> None:
    answer = ANSWERS[name](DELTAS)
    (tmp_path / "answer.sse").write_bytes(answer.body)
    outcome = simulate([tmp_path / "answer.sse"], provider=SDK_CLIENTS[name].provider)
    assert outcome.state == "finished"
    assert outcome.message is not None
    assert outcome.message.text() == answer.text
    assert answer.text.count(" word") == DELTAS


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("bench-tee")
    for name, make in ANSWERS.items():
        (tmp / name).write_bytes(make(DELTAS).body)
    with serve.running({name: tmp / name for name in ANSWERS}) as url:
        yield url


@pytest.mark.parametrize("name", list(SDK_CLIENTS))
async def test_a_run_each_way_reads_the_whole_answer(
    redis: Redis, prefix: str, provider: str, name: str
) -> None:
    settings = Settings(prefix=prefix, partitions=PARTITIONS, block_ms=100)
    runner = TurnRunner(Producer(redis, partitions=PARTITIONS, prefix=prefix), 30)
    answer = ANSWERS[name](DELTAS)
    rig = Rig(f"{provider}/{name}", runner, f"s-bench-{name}")
    async with running_worker(redis, settings):
        samples = await compare(SDK_CLIENTS[name], answer, rig, 1)  # raises on missing text
    await runner.close()
    assert {way: len(runs) for way, runs in samples.items()} == dict.fromkeys(WAYS, 1)
    teed = samples["teed"][0]
    assert 0 < teed.stream_s <= teed.turn_s
    row = summary(answer, DELTAS, samples)
    assert row["bytes"] == len(answer.body)
    assert row["cpu_ratio"] > 0

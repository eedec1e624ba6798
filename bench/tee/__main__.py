"""`python -m bench.tee [--sdk NAME ...] [--deltas 20000] [--repeat 5] [--json] [--redis-url URL]`

Per SDK (anthropic, openai, google-genai; bench/tee/__init__.py says what is compared): the
median of `--repeat` runs each way of the app's CPU µs per streamed byte, plain and teed, and
their ratio; the CPU the tee adds per text delta; the wall times. On a private redis-server
with one worker process, unless `--redis-url` names a Redis (then under a prefix of its own,
deleted after).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common.output import emit
from bench.common.procs import WorkerConfig, WorkerDied, WorkerPool, redis_url
from bench.common.redis_ops import delete_prefix
from bench.tee import serve
from bench.tee.answers import ANSWERS, Answer
from bench.tee.measure import Rig, Sample, compare
from terminus.service.redis.connect import client_options, connect
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.runner import TurnRunner
from terminus.service.settings import Settings
from tests.support.sdk_clients import SDK_CLIENTS

PARTITIONS = 4
DECISION_TIMEOUT_S = 300.0  # a worker behind a few MB of deltas on a loaded machine


def summary(answer: Answer, deltas: int, samples: dict[str, list[Sample]]) -> dict[str, Any]:
    """Medians each way, per byte of the body and per delta, and the teed/plain ratio."""
    size = len(answer.body)
    cpu = {way: statistics.median(s.cpu_s for s in runs) for way, runs in samples.items()}
    stream = {way: statistics.median(s.stream_s for s in runs) for way, runs in samples.items()}
    return {
        "bytes": size,
        "deltas": deltas,
        "cpu_us_per_byte": {way: cpu[way] * 1e6 / size for way in cpu},
        "cpu_ratio": cpu["teed"] / cpu["plain"],
        "added_cpu_us_per_delta": (cpu["teed"] - cpu["plain"]) * 1e6 / deltas,
        "stream_s": stream,
        "stream_ratio": stream["teed"] / stream["plain"],
        "turn_s": statistics.median(s.turn_s for s in samples["teed"]),
        "runs": {way: [list(s) for s in runs] for way, runs in samples.items()},
    }


async def measure(
    url: str, prefix: str, names: Sequence[str], deltas: int, repeats: int, tmp: Path
) -> dict[str, Any]:
    """Each SDK compared, against the provider process and Redis at `url` (a worker reads it)."""
    answers = {name: ANSWERS[name](deltas) for name in names}
    for name, answer in answers.items():
        (tmp / name).write_bytes(answer.body)
    redis = connect(url, **client_options(Settings()))
    runner = TurnRunner(Producer(redis, partitions=PARTITIONS, prefix=prefix), DECISION_TIMEOUT_S)
    report: dict[str, Any] = {}
    try:
        with serve.running({name: tmp / name for name in names}) as provider:
            for name in names:
                rig = Rig(f"{provider}/{name}", runner, f"bench-tee-{name}")
                samples = await compare(SDK_CLIENTS[name], answers[name], rig, repeats)
                report[name] = summary(answers[name], deltas, samples)
    finally:
        await runner.close()
        await delete_prefix(redis, prefix)
        await redis.aclose()
    return report


async def main_async(args: argparse.Namespace, url: str, tmp: Path) -> dict[str, Any]:
    prefix = f"bench-tee-{uuid.uuid4().hex[:8]}"
    settings = Settings()
    config = WorkerConfig(url, prefix, PARTITIONS, settings.batch_size, tmp)
    with WorkerPool(config, 1):
        return await measure(url, prefix, args.sdk, args.deltas, args.repeat, tmp)


def table(report: dict[str, Any]) -> str:
    lines = [
        f"{'sdk':<13}{'MB':>6}{'plain µs/B':>12}{'teed µs/B':>11}{'ratio':>7}"
        f"{'+µs/delta':>11}{'stream s plain/teed':>22}{'turn s':>8}"
    ]
    for name, row in report.items():
        per_byte, stream = row["cpu_us_per_byte"], row["stream_s"]
        lines.append(
            f"{name:<13}{row['bytes'] / 1e6:>6.2f}{per_byte['plain']:>12.3f}"
            f"{per_byte['teed']:>11.3f}{row['cpu_ratio']:>7.2f}"
            f"{row['added_cpu_us_per_delta']:>11.1f}"
            f"{stream['plain']:>13.2f} / {stream['teed']:<6.2f}{row['turn_s']:>8.2f}"
        )
    return "\n".join(lines)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.tee", description=__doc__)
    parser.add_argument("--sdk", action="append", choices=list(SDK_CLIENTS), help="repeatable")
    parser.add_argument("--deltas", type=int, default=20_000, help="text deltas per answer")
    parser.add_argument("--repeat", type=int, default=5, help="measured runs each way")
    parser.add_argument("--redis-url", help="use this Redis, not a private one")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    args.sdk = args.sdk or list(SDK_CLIENTS)
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(argv)
    try:
        with (
            tempfile.TemporaryDirectory(prefix="terminus-tee-") as tmp,
            redis_url(args.redis_url, Path(tmp) / "redis") as url,
        ):
            report = asyncio.run(main_async(args, url, Path(tmp)))
    except KeyboardInterrupt:
        raise SystemExit("bench.tee: interrupted; the worker and Redis stopped") from None
    except WorkerDied as exc:
        raise SystemExit(f"bench.tee: {exc}") from None
    emit(report, args.json, table)


if __name__ == "__main__":
    main()

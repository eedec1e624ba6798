"""One SDK's answer streamed plain and teed, alternating: each run's app CPU and wall times.

Each run makes a new client on a new connection, either way, after a garbage collection, so a
run pays for no earlier run's garbage. CPU is `time.process_time()`: every thread of the app's
process, the event loop's and any other. A teed run is a whole turn: the attempt published as
the SDK reads it, then the wait for the workers' decision and the read of the proven message
(`turn_s`); `stream_s` ends where the SDK's stream ended, as a plain run's does, or where the
runner cancelled the app's request because the workers' conclusion came first (the SDK had
been handed the last bytes by then, and had only their parse left).
"""

from __future__ import annotations

import gc
import time
from typing import NamedTuple, cast

import httpx2

from bench.tee.answers import Answer
from terminus.service.sdk.runner import TurnRunner
from terminus.service.sdk.steps import Attempt
from terminus.service.sdk.tee import TeeTransport
from tests.support.sdk_clients import SdkClient, Seen

WAYS = ("plain", "teed")


class Sample(NamedTuple):
    cpu_s: float
    stream_s: float  # until the SDK's stream ended
    turn_s: float  # until the proven message was read (a plain run: its stream's end)


class Rig(NamedTuple):
    """Where a run streams from, and the runner a teed run goes through."""

    url: str  # the SDK's base URL on the benchmark's provider
    runner: TurnRunner
    session: str


def _check(what: str, got: str, answer: Answer) -> None:
    if got != answer.text:
        raise RuntimeError(
            f"{what}: {len(got)} characters of text, not the {len(answer.text)} sent"
        )


async def plain(sdk: SdkClient, answer: Answer, rig: Rig) -> Sample:
    """The SDK on its own transport."""
    seen: Seen = []
    async with httpx2.AsyncClient(transport=httpx2.AsyncHTTPTransport()) as http:
        client = sdk.make(rig.url, http)
        gc.collect()
        cpu, start = time.process_time(), time.perf_counter()
        await sdk.ask(client, seen)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    _check("a plain run", "".join(seen), answer)
    return Sample(cpu, wall, wall)


async def teed(sdk: SdkClient, answer: Answer, rig: Rig, turn: str) -> Sample:
    """The SDK through the tee, as one turn of `rig.runner`."""
    seen: Seen = []
    ended: list[float] = []
    tee = TeeTransport(httpx2.AsyncHTTPTransport())
    transport = cast("httpx2.AsyncBaseTransport", tee)  # an httpx transport to mypy
    async with httpx2.AsyncClient(transport=transport) as http:
        client = sdk.make(rig.url, http)

        async def ask(attempt: Attempt) -> None:
            try:
                await sdk.ask(client, seen)
            finally:  # or cancelled: the workers' conclusion can come before the SDK's end
                ended.append(time.perf_counter())

        gc.collect()
        cpu, start = time.process_time(), time.perf_counter()
        message = await rig.runner.run_turn(rig.session, turn, tee.call(ask, sdk.provider))
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    _check("a teed run", "".join(seen), answer)
    _check("a teed run's proven message", message.text(), answer)
    return Sample(cpu, ended[-1] - start, wall)


async def compare(
    sdk: SdkClient, answer: Answer, rig: Rig, repeats: int
) -> dict[str, list[Sample]]:
    """`repeats` runs each way after one unmeasured warm-up each, in alternating order."""
    samples: dict[str, list[Sample]] = {way: [] for way in WAYS}
    for run in range(repeats + 1):
        for way in WAYS if run % 2 else WAYS[::-1]:
            if way == "plain":
                sample = await plain(sdk, answer, rig)
            else:
                sample = await teed(sdk, answer, rig, f"{rig.session}-t{run}")
            if run:
                samples[way].append(sample)
    return samples

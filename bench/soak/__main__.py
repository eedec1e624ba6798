"""Chaos soak: a steady load of concurrent turns for `--duration` seconds while workers are
SIGKILLed and paused past their lease, Redis is killed and restarted on its AOF, the workers'
connections are blackholed and malformed and poison entries are injected (with `--cluster`, on a
Redis Cluster whose primaries are killed and failed over instead), and a client sends garbage
cursors and tokens to a gateway throughout; then it verifies what must hold.

    python -m bench.soak [--duration 600] [--cluster] [--json] [--series soak.json]

Checks: 0 frames lost, duplicated, unexpected or out of order in any session (read live as a
subscriber reads them, compared with the in-process fold of what was published); `replay
--verify` clean; every malformed entry dead-lettered with its reason and bytes, and no other
dead letter; Redis memory bounded (bench/soak/verify.py defines it); no worker crashed; every
garbage request refused with a 4xx and the gateway's followers served; the database of a
`terminus sink` that ran through the faults (SQLite by default, `--sink URL`, `--no-sink`),
once `sink --once` applied the rest, holds every message and final turn of Redis and its
archive, byte for byte, and nothing else (bench/soak/sunk.py). Exits 1 when a check
fails. Not part of the test suite: docs/reliability.md has the method and results.
Parts (bench/soak/): rig (Redis, proxy, workers, the sink), load, chaos, gateway, check
(frames), verify (the rest), sunk (the sink's database), series and report; `python -m
bench.soak.plot` draws the figure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import faulthandler
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import msgspec
from redis.asyncio import Redis

from bench.common.procs import raise_on_sigterm
from bench.soak.chaos import CLUSTER_KINDS, KINDS, Chaos
from bench.soak.check import FrameReader
from bench.soak.gateway import GatewayAbuse
from bench.soak.load import Load, LoadShape
from bench.soak.log import LogReader
from bench.soak.report import Outcome, build, summary, write_series
from bench.soak.rig import Rig, RigConfig
from bench.soak.series import Series
from bench.soak.sunk import sink_report
from bench.soak.verify import (
    dead_letter_report,
    memory_by_kind,
    memory_report,
    replay_report,
    sample_memory,
)
from tests.support.faults import harness, load

PROGRESS_S: Final = 10.0


class Run:
    """One soak: the rig, a direct client, the load, the checker and the faults."""

    def __init__(self, args: argparse.Namespace, rig: Rig, redis: Redis) -> None:
        self.args, self.rig, self.redis = args, rig, redis
        self.series = Series()
        self.by_kind: dict[str, dict[str, int]] = {}
        self.log = LogReader(redis, rig.settings)
        self.reader = FrameReader(redis, rig.settings, self.series, self.log, args.grace)
        producer = load.RecordingProducer(redis, rig.settings, deadline_s=120)
        shape = LoadShape(
            sessions=args.sessions,
            turns_per_session=args.turns,
            deltas=args.deltas,
            chunk_ms=args.chunk_ms,
        )
        self.load = Load(producer, self.reader, self.series, shape, args.seed)
        self.chaos = Chaos(
            rig, redis, self.load, self.series, args.fault_every, args.seed + 1, args.faults
        )

    async def __call__(self) -> dict[str, Any]:
        await harness.wait_owned(self.redis, self.rig.settings)
        async with GatewayAbuse(
            {"REDIS_URL": self.rig.url},  # direct: a blackhole cuts the workers, not the gateway
            self.rig.settings,
            self.rig.tmp / "logs",
            self.args.seed + 2,
            self._live_sessions,
        ) as self.gateway:
            return await self._run()

    def _live_sessions(self) -> list[str]:
        return [w.session_id for w in self.reader.active.values() if not w.closed]

    async def _run(self) -> dict[str, Any]:
        self.series.t0 = time.perf_counter()
        background = [
            asyncio.create_task(self.reader.run(time.perf_counter)),
            asyncio.create_task(self.log.run()),
            asyncio.create_task(
                sample_memory(self.redis, self.rig.settings, self.series, self.args.sample_every)
            ),
            asyncio.create_task(self._progress()),
            asyncio.create_task(self.gateway.run()),
        ]
        try:
            loading = asyncio.create_task(self.load.run())
            await self.chaos.run(until_s=self.args.duration)
            await asyncio.sleep(max(0.0, self.args.duration - self.series.now()))
            self.load.stop.set()
            self._say("load stopping: lanes finish their sessions")
            await loading
            loaded_s = self.series.now()
            self.by_kind = await memory_by_kind(self.redis, self.rig.settings.prefix)
            self._say(f"draining: {len(self.reader.active)} sessions still in play")
            await self.reader.drained(self.args.drain)
            left = len(self.reader.active)
            self.reader.judge_all()
        finally:
            for task in background:
                task.cancel()
            ended = await asyncio.gather(*background, return_exceptions=True)
        for result in ended:  # a reader that died would pass for a quiet run
            if isinstance(result, Exception):
                raise result
        return await self._verify(loaded_s, left)

    async def _verify(self, loaded_s: float, left: int) -> dict[str, Any]:
        settings = self.rig.settings
        self._say("verifying: waiting for every log to be delivered and acknowledged")
        with contextlib.suppress(AssertionError):  # a partition still busy shows in the replay
            await harness.wait_quiet(self.redis, settings, [], timeout=self.args.drain)
        self._say("verifying: frames, dead letters, replay --verify")
        await self.reader.count_late_extra()
        workers = self.rig.report()  # before the stop, whose kills are not the soak's faults
        sinks = self.rig.sink_report()
        await self.rig.stop_workers()
        self._say("verifying: sink --once, then the database against Redis and the archive")
        sink = await sink_report(self.rig, self.redis, self.args.drain, sinks)
        env = self.rig.pool.env | {"REDIS_URL": self.rig.url}
        outcome = Outcome(
            config=config_of(self.args, self.rig),
            loaded_s=loaded_s,
            sessions_left=left,
            load=self._load_report(),
            frames=self.reader.totals.report(),
            dead_letters=await dead_letter_report(
                self.redis, settings, self.chaos.injected, self.reader.dead
            ),
            replay=await replay_report(env),
            memory=memory_report(self.series.memory, loaded_s, self.args.memory_slack)
            | {"by_kind_at_end_of_load": self.by_kind},
            workers=workers,
            gateway=self.gateway.report(),
            gateway_failures=self.gateway.failures(),
            sink=sink,
        )
        return build(outcome, self.series)

    def _load_report(self) -> dict[str, Any]:
        return {
            "sessions": self.load.sessions,
            "turns": self.load.turns,
            "events_published": self.load.producer.count,
            "publish_retries": self.load.producer.retries,
            "reader_errors": self.reader.read_errors + self.log.read_errors,
        }

    def _say(self, text: str) -> None:
        if not self.args.quiet:
            print(f"soak {self.series.now():6.0f}s: {text}", file=sys.stderr, flush=True)

    async def _progress(self) -> None:
        while True:
            await asyncio.sleep(PROGRESS_S)
            totals = self.reader.totals
            self._say(
                f"{self.load.producer.count} events, {totals.sessions} sessions judged, "
                f"{len(self.series.faults)} faults, {len(self.rig.crashes)} crashes, "
                f"frames lost {totals.frames.lost}, duplicated {totals.frames.duplicated}, "
                f"events lost {totals.events.lost}"
            )


def config_of(args: argparse.Namespace, rig: Rig) -> dict[str, Any]:
    """The run's settings, as the report records them."""
    shape = ("duration", "sessions", "turns", "deltas", "chunk_ms")
    chaos = ("fault_every", "faults", "seed", "cluster")
    return {name: getattr(args, name) for name in shape + chaos} | {
        "workers": rig.config.workers,
        "partitions": rig.config.partitions,
        "lease_ttl_ms": rig.config.lease_ttl_ms,
        "retain_ms": rig.config.retain_ms,
        "memory_slack": args.memory_slack,
        "sink": rig.config.sink,
    }


async def soak(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Start the rig in `tmp`, run the soak, stop everything; returns the report."""
    config = RigConfig(
        workers=args.workers,
        partitions=args.partitions,
        lease_ttl_ms=args.lease_ttl_ms,
        retain_ms=args.retain_ms,
        archive_dir=args.archive_dir,
        cluster=args.cluster,
        sink=sink_url(args, tmp),
    )
    async with Rig(tmp, config) as rig:
        redis = rig.client()
        try:
            return await Run(args, rig, redis)()
        finally:
            await redis.aclose()


def sink_url(args: argparse.Namespace, tmp: Path) -> str | None:
    """The soak's sink: `--sink`, else a SQLite file in the temp dir; none with `--no-sink`,
    nor on a cluster unless `--sink` names one (the check scans one server's keys)."""
    if args.no_sink or (args.cluster and args.sink is None):
        return None
    return str(args.sink or f"sqlite:///{tmp / 'sink.db'}")


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line; its defaults are those of `LoadShape` and `RigConfig`."""
    shape, rig = LoadShape(), RigConfig()
    p = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n")[0])
    p.add_argument("--duration", type=float, default=600.0, help="seconds of load and faults")
    p.add_argument(
        "--sessions", type=int, default=shape.sessions, help="sessions publishing at once"
    )
    p.add_argument("--turns", type=int, default=shape.turns_per_session, help="turns per session")
    p.add_argument("--deltas", type=int, default=shape.deltas, help="mean text deltas per attempt")
    p.add_argument(
        "--chunk-ms", type=float, default=shape.chunk_ms, help="mean pause between chunks"
    )
    p.add_argument("--fault-every", type=float, default=12.0, help="mean seconds between faults")
    p.add_argument(
        "--faults",
        type=_kinds,
        default=None,
        help="kinds, comma-separated (default: all of the mode)",
    )
    p.add_argument(
        "--cluster", action="store_true", help="on a private Redis Cluster (3 primaries + replicas)"
    )
    p.add_argument("--workers", type=int, default=rig.workers, help="worker processes")
    p.add_argument("--partitions", type=int, default=rig.partitions, help="partitions P")
    p.add_argument(
        "--lease-ttl-ms", type=int, default=rig.lease_ttl_ms, help="TERMINUS_LEASE_TTL_MS"
    )
    p.add_argument(
        "--retain-ms", type=int, default=rig.retain_ms, help="TERMINUS_RETAIN_MS of workers"
    )
    p.add_argument("--archive-dir", type=Path, default=None, help="default: in the temp dir")
    p.add_argument("--memory-slack", type=float, default=0.10, help="bounded-memory slack")
    p.add_argument("--sample-every", type=float, default=1.0, help="seconds between samples")
    p.add_argument("--grace", type=float, default=1.0, help="seconds a late duplicate may take")
    p.add_argument("--drain", type=float, default=120.0, help="seconds to wait for the end")
    p.add_argument("--sink", default=None, metavar="URL", help="sink --to (default: SQLite)")
    p.add_argument("--no-sink", action="store_true", help="run the soak without a sink")
    p.add_argument("--seed", type=int, default=1, help="seed of the load and the faults")
    p.add_argument("--series", type=Path, default=None, help="write the JSON report here")
    p.add_argument("--keep", type=Path, default=None, help="keep Redis data, logs in new DIR")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = p.parse_args(argv)
    mode = CLUSTER_KINDS if args.cluster else KINDS
    args.faults = args.faults or list(mode)
    if set(args.faults) - set(mode):
        p.error(f"--faults: on {'a cluster' if args.cluster else 'one Redis'} the kinds are {mode}")
    return args


def _kinds(text: str) -> list[str]:
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    known = dict.fromkeys(KINDS + CLUSTER_KINDS)
    unknown = set(kinds) - set(known)
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(f"kinds are {', '.join(known)}; not {sorted(unknown)}")
    return kinds


def main(argv: Sequence[str] | None = None) -> None:
    """Run, print the report, exit 1 if a check failed."""
    args = parse(argv)
    if args.keep is not None and args.keep.exists() and any(args.keep.iterdir()):
        raise SystemExit(f"bench.soak: --keep {args.keep} is not empty (its Redis would reload)")
    raise_on_sigterm()
    # A long run that seems stuck: `kill -USR1 <pid>` prints every thread's stack to stderr.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        with tempfile.TemporaryDirectory(prefix="terminus-soak-") as tmp:
            base = args.keep or Path(tmp)
            base.mkdir(parents=True, exist_ok=True)
            report = asyncio.run(soak(args, base))
    except KeyboardInterrupt:
        raise SystemExit("bench.soak: interrupted; workers and Redis stopped") from None
    if args.series is not None:
        write_series(args.series, report)
    if args.json:
        sys.stdout.write(msgspec.json.encode(report).decode() + "\n")
    else:
        print(summary(report))
    raise SystemExit(0 if report["verdict"]["ok"] else 1)


if __name__ == "__main__":
    main()

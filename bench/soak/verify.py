"""The soak's end-of-run checks besides the frames: dead letters, `replay --verify`, memory.

Memory is bounded when, over the samples taken while the load ran, the median of the last third
exceeds the median of the middle third by at most `slack` (a share, 0.10 = 10%). The first third
is the warm-up (retention holds `TERMINUS_RETAIN_MS` of turns before it releases any). The rule
is applied to `used_memory` less the dead streams (dead letters are kept by design and grow with
the malformed entries injected, not with the turns) and to the number of keys. Memory that grows
with the turns grows by a third or more from the middle third's median to the last's: a 10%
slack fails it. Medians, not maxima: a third's maximum is whichever fault's transient the 1 s
sampler happened to catch (a 2 MB malformed entry is in a client buffer, the log and the AOF
buffer at once for about a second; a blackhole's backlog drains in seconds), so maxima judged
the luck of the sampling (docs/reliability.md, "The memory rule"). The maxima stay in the report.
"""

from __future__ import annotations

import asyncio
import re
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any, Final, cast

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError

from bench.soak.log import raise_if_cancelled
from bench.soak.series import MemorySample, Series
from terminus.service.keys import Keys
from terminus.service.redis.connect import is_cluster
from terminus.service.settings import Settings
from tests.support.faults import harness, malformed

Source = tuple[str, str]
SAMPLES: Final = 5
REPLAY: Final = (sys.executable, "-m", "terminus", "replay", "--verify")
REPLAYED: Final = re.compile(r"replayed (\d+) entries")
DIFFERENT: Final = re.compile(r"DIFFERENT \((\d+)\): (.*)")


def bounded(values: Sequence[float], slack: float) -> dict[str, Any]:
    """The rule of the module docstring over `values` in time order."""
    third = len(values) // 3
    if third < 2:
        return {"bounded": None, "why": f"only {len(values)} samples: too few to judge"}
    middle, last = values[third : 2 * third], values[2 * third :]
    level_middle, level_last = statistics.median(middle), statistics.median(last)
    growth = (level_last - level_middle) / level_middle if level_middle else 0.0
    return {
        "middle_third_median": level_middle,
        "last_third_median": level_last,
        "growth": round(growth, 4),
        "slack": slack,
        "bounded": growth <= slack,
        "middle_third_max": max(middle),
        "last_third_max": max(last),
    }


async def sample_memory(redis: Redis, settings: Settings, series: Series, every_s: float) -> None:
    """Append a `MemorySample` every `every_s` seconds until cancelled (none while Redis is
    down)."""
    dead = [Keys(p, settings.prefix).dead for p in range(settings.partitions)]
    while True:
        try:
            used, keys = await memory_and_keys(redis)
            usage = [await redis.memory_usage(key, samples=0) for key in dead]
            series.memory.append(
                MemorySample(
                    t_s=round(series.now(), 2),
                    used_memory=used,
                    dead_bytes=sum(u or 0 for u in usage),
                    keys=keys,
                )
            )
        except (RedisError, OSError):
            raise_if_cancelled()
        await asyncio.sleep(every_s)


async def memory_and_keys(redis: Redis) -> tuple[int, int]:
    """`used_memory` and the number of keys: of the server, or summed over a cluster's primaries
    (a replica holds copies, not more data)."""
    if not is_cluster(redis):
        return int((await redis.info("memory"))["used_memory"]), int(await redis.dbsize())
    cluster = cast(RedisCluster, redis)
    used = keys = 0
    for node in cluster.get_primaries():
        info = await cluster.execute_command("INFO", "memory", target_nodes=node)
        used += int(info["used_memory"])
        keys += int(await cluster.execute_command("DBSIZE", target_nodes=node))
    return used, keys


async def memory_by_kind(
    redis: Redis, prefix: str, samples: int | None = None
) -> dict[str, dict[str, int]]:
    """Keys and bytes (MEMORY USAGE, sampled; `samples=0` reads every element) per kind of key
    (`in`, `session`, `turn`...): where the memory is, when it is not bounded."""
    found: dict[str, dict[str, int]] = {}
    keys = [key async for key in redis.scan_iter(match=f"{prefix}:*", count=1000)]
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        async with redis.pipeline(transaction=False) as pipe:
            for key in chunk:
                pipe.memory_usage(key, samples=samples)
            sizes: list[int | None] = await pipe.execute()
        for key, size in zip(chunk, sizes, strict=True):
            parts = key.decode().split(":")
            kind = parts[2] if len(parts) > 2 and parts[1].startswith("{") else parts[1]
            entry = found.setdefault(kind, {"keys": 0, "bytes": 0})
            entry["keys"] += 1
            entry["bytes"] += size or 0
    return dict(sorted(found.items(), key=lambda item: -item[1]["bytes"]))


def memory_report(samples: Sequence[MemorySample], until_s: float, slack: float) -> dict[str, Any]:
    """The bounded rule on memory (without dead letters) and on keys, over the loaded run."""
    loaded = [s for s in samples if s.t_s <= until_s]
    net, keys = bounded([s.net for s in loaded], slack), bounded([s.keys for s in loaded], slack)
    verdict = [part["bounded"] for part in (net, keys)]
    return {
        "rule": "median(last third) <= median(middle third) * (1 + slack), samples while loaded",
        "samples": len(loaded),
        "used_memory_less_dead": net,
        "keys": keys,
        "peak_used_memory": max((s.used_memory for s in loaded), default=0),
        "final_dead_bytes": loaded[-1].dead_bytes if loaded else 0,
        "bounded": None if None in verdict else all(verdict),
    }


async def dead_letter_report(
    redis: Redis,
    settings: Settings,
    injected: dict[Source, malformed.Junk],
    rejected: dict[Source, tuple[str, bytes]],
) -> dict[str, Any]:
    """Every injected entry dead with its reason and bytes, and no dead letter unaccounted for."""
    dead = await harness.dead_letters(redis, settings)
    missing = [s for s in [*injected, *rejected] if s not in dead]
    wrong = wrong_letters(dead, injected, rejected)
    unexpected = {s: f[b"reason"].decode()[:200] for s, f in dead.items()}
    for source in [*injected, *rejected]:
        unexpected.pop(source, None)
    return {
        "injected_undecodable": len(injected),
        "rejected_by_core": len(rejected),
        "dead_letters": len(dead),
        "missing": len(missing),
        "wrong_reason_or_bytes": len(wrong),
        "unexpected": len(unexpected),
        "samples": {
            "missing": [str(s) for s in missing[:SAMPLES]],
            "wrong": wrong[:SAMPLES],
            "unexpected": [f"{s}: {r}" for s, r in list(unexpected.items())[:SAMPLES]],
        },
    }


def wrong_letters(
    dead: dict[Source, dict[bytes, bytes]],
    injected: dict[Source, malformed.Junk],
    rejected: dict[Source, tuple[str, bytes]],
) -> list[str]:
    """Dead letters of injected entries whose reason or bytes are not the expected ones."""
    wrong: list[str] = []
    for source, item in injected.items():
        if source in dead:
            try:
                malformed.check_junk(dead[source], item)
            except AssertionError as exc:
                wrong.append(f"{source}: {exc}"[:300])
    for source, (reason, raw) in rejected.items():
        found = dead.get(source)
        if found is not None and (found[b"reason"].decode(), found[b"raw"]) != (reason, raw):
            wrong.append(f"{source}: {found[b'reason'].decode()!r}, expected {reason!r}"[:300])
    return wrong


async def replay_report(env: dict[str, str]) -> dict[str, Any]:
    """`terminus replay --verify` itself, run as a process with the workers' environment (and
    Redis direct), so that it reads whatever the CLI reads (the archive too, once retention
    exists) and judges as the CLI judges: exit 0 means identical."""
    start = time.perf_counter()
    pipe = asyncio.subprocess.PIPE
    process = await asyncio.create_subprocess_exec(
        *REPLAY, env=env, cwd=harness.REPO, stdout=pipe, stderr=pipe
    )
    out, err = await process.communicate()
    text = out.decode(errors="replace")
    entries, different = REPLAYED.search(text), DIFFERENT.search(text)
    report: dict[str, Any] = {
        "command": "terminus replay --verify",
        "exit": process.returncode,
        "entries": int(entries[1]) if entries else None,
        "differences": int(different[1]) if different else 0,
        "first_difference": different[2][:500] if different else None,
        "seconds": round(time.perf_counter() - start, 1),
    }
    if process.returncode and not different:
        report["differences"] = None  # it failed before it could compare
        report["output"] = (text + err.decode(errors="replace"))[-2000:]
    return report

"""The text tables of `python -m bench.capacity`: the inputs, the worked examples, the check."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from bench.capacity.model import Demand, Inputs, Limits, Plan

Cell = Callable[[Plan], str]

KINDS_SHOWN: Final = 8

ROWS: Final[tuple[tuple[str, Cell], ...]] = (
    ("provider tokens/s", lambda p: f"{p.tokens_per_s:,.0f}"),
    ("worker processes (tokens/s each)", lambda p: f"{p.workers:,} ({p.worker_load:,.0f})"),
    ("worker CPU, cores", lambda p: f"{p.worker_cores:,.1f}"),
    ("Redis CPU (primaries), cores", lambda p: f"{p.redis_cores:,.1f}"),
    ("Redis shards (for CPU / for memory)", lambda p: _shards(p)),
    ("Redis Clusters (<= 1,000 primaries each)", lambda p: f"{p.clusters:,}"),
    ("Redis memory in the window, GB", lambda p: f"{p.redis_gb:,.1f}"),
    ("growth with retention off, GB/hour", lambda p: f"{p.redis_gb_per_hour_unretained:,.1f}"),
    ("gateway frames/s delivered", lambda p: f"{p.gateway_frames_per_s:,.0f}"),
    ("gateway processes", lambda p: f"{p.gateway_processes:,}"),
    ("partitions, at least", lambda p: f"{p.partitions:,}"),
    ("cores provisioned (all processes, replicas too)", lambda p: f"{p.cores:,.0f}"),
)


def _shards(p: Plan) -> str:
    return f"{p.shards:,} ({p.shards_for_cpu:,} / {p.shards_for_memory:,})"


def inputs_table(inputs: Inputs) -> str:
    lines = [
        "| turns in flight | tokens/s | worker µs/token | Redis µs/token |",
        "|---:|---:|---:|---:|",
    ]
    for c in sorted(inputs.costs, key=lambda c: c.tokens_per_s):
        lines.append(
            f"| {c.turns:,.0f} | {c.tokens_per_s:,.0f} | {c.worker_us_per_token:.1f} "
            f"| {c.redis_us_per_token:.1f} |"
        )
    lines += ["", "| key kind | bytes per token | bytes per turn |", "|---|---:|---:|"]
    kinds = sorted(inputs.bytes_per_token.items(), key=lambda kv: -kv[1])
    shown, rest = kinds[:KINDS_SHOWN], kinds[KINDS_SHOWN:]
    for kind, per_token in shown:
        lines.append(f"| {kind} | {per_token:,.1f} | {inputs.bytes_per_turn[kind]:,.0f} |")
    if rest:
        names = ", ".join(k for k, _ in rest)
        per_token = sum(v for _, v in rest)
        per_turn = sum(inputs.bytes_per_turn[k] for k, _ in rest)
        lines.append(f"| the rest ({names}) | {per_token:,.1f} | {per_turn:,.0f} |")
    total_turn = sum(inputs.bytes_per_turn.values())
    lines.append(f"| **all** | {inputs.total_bytes_per_token:,.1f} | {total_turn:,.0f} |")
    lines += [
        "",
        f"tokens per turn {inputs.tokens_per_turn:.0f}, frames per token "
        f"{inputs.frames_per_token:.3f}, gateway {inputs.gateway_us_per_frame:.1f} µs per frame "
        "delivered to one subscriber",
    ]
    return "\n".join(lines)


def examples_table(demands: Sequence[Demand], plans: Sequence[Plan], limits: Limits) -> str:
    head = "| | " + " | ".join(f"{d.concurrent_turns:,.0f} turns" for d in demands) + " |"
    lines = [head, "|---|" + "---:|" * len(demands)]
    for name, cell in ROWS:
        lines.append(f"| {name} | " + " | ".join(cell(p) for p in plans) + " |")
    d = demands[0]
    lines += [
        "",
        f"{d.tokens_per_s_per_turn:g} tokens/s per turn, {d.subscribers_per_session:g} "
        f"subscriber(s) per session, retention window {d.retain_s:g} s; each process or shard "
        f"at most {limits.core_share:.0%} of a core, {limits.shard_gb:g} GB a shard, memory "
        f"x{limits.memory_overhead:g} over the keys' bytes, {limits.replicas} replica(s) a shard",
    ]
    return "\n".join(lines)


def check_table(runs: Sequence[dict[str, Any]], key: str = "figures") -> str:
    lines = [
        "| run | tokens/s | figure | predicted | measured | ratio | within 25% |",
        "|---:|---:|---|---:|---:|---:|---|",
    ]
    for n, run in enumerate(runs, 1):
        for name, f in run[key].items():
            within = "yes" if f["within_25pct"] else "no"
            lines.append(
                f"| {n} | {run['tokens_per_s']:,.0f} | {name} | {f['predicted']:,.1f} "
                f"| {f['measured']:,.1f} | {f['ratio']:.2f} | {within} |"
            )
    return "\n".join(lines)

"""The end-to-end report as a table a person reads."""

from __future__ import annotations

import math
from typing import Any


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _batch(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _split(shares: list[float] | None) -> str:
    if not shares or len(shares) < 2:
        return ""
    return "; worker CPU split " + "/".join(f"{s:.0%}" for s in shares)


def _cores(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f}"


def machine(r: dict[str, Any]) -> str:
    return (
        f"terminus end-to-end benchmark: Python {r['python']} (redis-py parser: "
        f"{'hiredis' if r['hiredis'] else 'pure Python'}), Redis {r['redis_version']} "
        f"({r['redis']})"
    )


def header(r: dict[str, Any]) -> list[str]:
    return [
        machine(r),
        f"workload: {r['events']:,} events ({r['expected_frames']:,} frames expected), "
        f"{r['deltas']} deltas/attempt, seed {r['seed']}; {r['partitions']} partitions, "
        f"batch {r['batch_size']}"
        + (f"; workers with {' '.join(r['worker_env'])}" if r["worker_env"] else ""),
        "",
    ]


def throughput(r: dict[str, Any]) -> list[str]:
    lines = [
        f"{'path':<46}{'events/s':>11}{'ratio':>8}{'worker':>9}{'redis':>9}{'script':>8}",
        f"{'':<46}{'':>11}{'to raw':>8}{'us/ev':>9}{'us/ev':>9}{'us/ev':>8}",
        f"{'raw XADD, pipelined':<46}{_rate(r['raw_xadd_events_per_s']):>11}",
        f"{'raw XREADGROUP + XACK drain (ceiling)':<46}{_rate(r['raw_events_per_s']):>11}"
        f"{'1.00':>8}{'':>9}{_us(r['raw_redis_cpu_us_per_event']):>9}",
    ]
    for w in (1, 2):
        s = f"_{w}w"
        label = f"terminus drain, {w} worker{'s' if w > 1 else ''}"
        lines.append(
            f"{label:<46}{_rate(r['e2e_events_per_s' + s]):>11}{r['ratio' + s]:>8.2f}"
            f"{_us(r['worker_cpu_us_per_event' + s]):>9}{_us(r['redis_cpu_us_per_event' + s]):>9}"
            f"{_us(r['redis_script_us_per_event' + s]):>8}"
        )
        lines.append(
            f"{'  same, counted from process spawn':<46}"
            f"{_rate(r['e2e_events_per_s_from_spawn' + s]):>11}"
            f"    (start-up {r['startup_s' + s]:.2f} s; {_batch(r['mean_batch' + s])} "
            f"entries/commit; producer published {_rate(r['producer_events_per_s' + s])}/s)"
        )
    if "e2e_events_per_s_peer" in r:
        lines.append(
            f"{'peer drain (bench/peer, FastStream), 1 process':<46}"
            f"{_rate(r['e2e_events_per_s_peer']):>11}{r['ratio_peer']:>8.3f}"
            f"{_us(r['worker_cpu_us_per_event_peer']):>9}{_us(r['redis_cpu_us_per_event_peer']):>9}"
            f"{'':>8}"
        )
        lines.append(
            f"{'  terminus (1 worker) over the peer':<46}{r['terminus_over_peer_drain']:>10.1f}x"
        )
    return lines + sink(r)


def sink(r: dict[str, Any]) -> list[str]:
    """The sink phase's lines (`--sink`), if it ran."""
    if "sink_rows_per_s" not in r:
        return []
    return [
        f"{'sink --once into SQLite, 1 process':<46}{_rate(r['sink_events_per_s']):>11}"
        f"    ({r['sink_rows']} rows in {r['sink_s']:.2f} s: {_rate(r['sink_rows_per_s'])} rows/s)",
        f"{'  same rows in the 1-worker drain':<46}{_rate(r['sink_drain_events_per_s']):>11}"
        f"    ({_rate(r['sink_drain_rows_per_s'])} rows/s; sink over drain "
        f"{r['sink_over_drain']:.2f}, from spawn {r['sink_over_drain_from_spawn']:.2f})",
    ]


def by_rate(r: dict[str, Any]) -> list[str]:
    """The by-rate table: added latency and CPU per event, ours and the peer's."""
    if not r.get("by_rate"):
        return []
    lines = [
        "",
        "by rate (one worker; latency added over the raw loop at the same rate; CPU µs/event;",
        "net = worker + Redis - the raw loop's Redis, which is the producer's and reader's own):",
        f"{'events/s':>9}{'p50':>7}{'p99':>7}{'p99.9':>7}{'raw p99':>8}{'worker':>8}{'redis':>7}"
        f"{'raw rd':>7}{'net':>7}{'/drain':>7}{'peer p99':>9}{'peer cpu':>9}",
    ]
    drain = r.get("drain_cpu_us_per_event")
    for row in r["by_rate"]:
        net = row["net_cpu_us_per_event"]
        lines.append(
            f"{row['rate']:>9,.0f}{_short(row['p50_ms']):>7}{_short(row['p99_ms']):>7}"
            f"{_short(row['p999_ms']):>7}{_short(row['raw_p99_ms']):>8}"
            f"{_short(row['worker_cpu_us_per_event']):>8}{_short(row['redis_cpu_us_per_event']):>7}"
            f"{_short(row.get('raw_redis_cpu_us_per_event')):>7}{_short(net):>7}"
            f"{_short(net / drain if net is not None and drain else None):>7}"
            f"{_short(row.get('peer_p99_ms')):>9}{_short(row.get('peer_cpu_us_per_event')):>9}"
        )
    lines.append(
        f"drain: {_short(drain)} µs/event (worker + Redis); highest rate with p99 added <= 10 ms: "
        f"{_rate(r.get('max_rate_p99_le_10ms'))} "
        f"({r.get('max_rate_p99_le_10ms_share_of_drain', 0):.0%} of the drain); the peer's: "
        f"{_rate(r.get('peer_max_rate_p99_le_10ms'))}; with p99 added <= 20 ms: "
        f"{_rate(r.get('max_rate_p99_le_20ms'))} "
        f"({r.get('max_rate_p99_le_20ms_share_of_drain', 0):.0%} of the drain)"
    )
    if r.get("idle_worker_cores") is not None:
        lines.append(f"idle worker: {r['idle_worker_cores']:.1%} of a core")
    return lines + floor_rows(r["by_rate"], drain)


def floor_rows(rows: list[dict[str, Any]], drain: float | None) -> list[str]:
    """The floor consumer beside terminus at each rate (`--floor`), where it was measured."""
    measured = [row for row in rows if row.get("floor_net_cpu_us_per_event") is not None]
    if not measured:
        return []
    lines = [
        "",
        "the floor at the same rates (bench/floor: read, one frame per entry, ack; nothing else):",
        f"{'events/s':>9}{'p99':>7}{'process':>9}{'redis':>7}{'net':>7}{'/drain':>7}"
        f"{'terminus net / floor net':>26}",
    ]
    for row in measured:
        net = row["floor_net_cpu_us_per_event"]
        lines.append(
            f"{row['rate']:>9,.0f}{_short(row['floor_p99_ms']):>7}"
            f"{_short(row['floor_cpu_us_per_event']):>9}{_short(row['floor_redis_cpu_us_per_event']):>7}"
            f"{_short(net):>7}{_short(net / drain if drain else None):>7}"
            f"{_short(row['net_over_floor']):>26}"
        )
    return lines


def _short(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if abs(value) < 100 else f"{value:,.0f}"


def checks(r: dict[str, Any]) -> list[str]:
    lines = [""]
    for w in ("1w", "2w"):
        lines.append(
            f"{w}: {r['frames_' + w]:,} frames of {r['expected_frames']:,} expected, "
            f"{r['dead_letters_' + w]} dead letters, {r['open_turns_' + w]} turns left open; "
            f"{r['redis_forks_' + w]} AOF rewrite(s) while draining; machine: "
            f"{_cores(r['machine_busy_cores_' + w])} of {r['cpu_count']} cores busy"
            + _split(r["worker_cpu_share_" + w])
        )
    return lines


def latency(r: dict[str, Any]) -> list[str]:
    if r["p99_ms"] is None:
        return []
    return [
        "",
        f"latency, publish -> frame visible, at {r['latency_rate_events_per_s']:,.0f} events/s "
        + (f"({r['latency_load']:.0%} of the 1-worker rate; " if r["latency_load"] else "(")
        + f"achieved "
        f"{r['latency_achieved_events_per_s']:,.0f}) for {r['latency_seconds']:.1f} s, "
        f"{r['latency_samples']:,} delta frames after {r['warmup_s']:.0f} s warm-up",
        f"{'':<34}{'p50 ms':>9}{'p99 ms':>9}{'p99.9 ms':>10}{'max ms':>9}{'unseen':>8}",
        f"{'XADD -> XREAD, no worker':<34}{_ms(r['baseline_p50_ms']):>9}"
        f"{_ms(r['baseline_p99_ms']):>9}{_ms(r['baseline_p999_ms']):>10}"
        f"{_ms(r['baseline_max_ms']):>9}{r['baseline_unseen']:>8}",
        f"{'terminus, 1 worker':<34}{_ms(r['p50_ms']):>9}{_ms(r['p99_ms']):>9}"
        f"{_ms(r['p999_ms']):>10}{_ms(r['max_ms']):>9}{r['latency_unseen']:>8}",
        "p99 ms of each second: " + " ".join(f"{v:.0f}" for v in r["p99_by_second_ms"]),
        f"CPU meanwhile, us/event: bench (producer + reader) "
        f"{_us(r['latency_bench_cpu_us_per_event'])}, worker "
        f"{_us(r['latency_worker_cpu_us_per_event'])}, redis "
        f"{_us(r['latency_redis_cpu_us_per_event'])}: {r['latency_cpu_cores']:.2f} cores busy; "
        f"{_batch(r['latency_mean_batch'])} entries/commit; "
        f"{r['latency_redis_forks']} AOF rewrite(s)",
        f"machine: {_cores(r['latency_machine_busy_cores'])} of {r['cpu_count']} cores busy "
        "(the rest of the machine's load is other processes)",
    ]


def verdict(r: dict[str, Any]) -> list[str]:
    lines = [""]
    if "throughput_target_met" in r:
        met = "met" if r["throughput_target_met"] else "NOT met"
        lines.append(
            f"target >= {r['target_events_per_s_per_worker']:,} events/s per worker: {met} "
            f"({_rate(r['e2e_events_per_s_1w'])})"
        )
    if "latency_target_met" in r:
        met = "met" if r["latency_target_met"] else "NOT met"
        lines.append(
            f"target p99 <= {r['target_p99_ms']:.0f} ms at half load: {met} "
            f"({_ms(r['p99_ms'])}; {_ms(r['added_p99_ms'])} over the baseline)"
        )
    return lines


def traces(r: dict[str, Any]) -> list[str]:
    """`--traces`: the drain without and with the follower exporting spans."""
    return [
        f"{'terminus drain, 1 worker':<46}{_rate(r['e2e_events_per_s_1w']):>11}",
        f"{'the same, terminus traces exporting beside it':<46}"
        f"{_rate(r['e2e_events_per_s_traces']):>11}{r['traces_drain_ratio']:>8.2f}"
        f"  (follower: {r['traces_follower_cpu_s'] or 0:.1f} s CPU, done "
        f"{r['traces_lag_s']:.1f} s after the drain)",
        f"spans received: {r['traces_spans_received']:,} in {r['traces_export_requests']} requests",
    ]


def realistic(r: dict[str, Any]) -> list[str]:
    """`--realistic`: costs per provider token and added latency under concurrent turns."""
    m = r["realistic_model"]
    return [
        f"realistic workload: {r['realistic_concurrent_turns']:.0f} turns in flight on average "
        f"(--turns {r['realistic_turns']}), {r['realistic_turns_started']} started in "
        f"{r['realistic_seconds']:.1f} s over {r['realistic_sessions']} sessions; seed {r['seed']}",
        f"  {r['realistic_tokens']:,} provider tokens ({_rate(r['realistic_tokens_per_s'])}/s) in "
        f"{r['realistic_reads']:,} network reads ({r['realistic_tokens_per_read']:.2f} tokens "
        f"a read); decode {m['rate_bounds'][0]:.0f}-{m['rate_bounds'][1]:.0f} tokens/s a turn",
        f"  producer: {r['realistic_producer']}; "
        f"{r['realistic_entries_per_token']:.3f} entries and "
        f"{r['realistic_frames_per_token']:.3f} frames per token",
        "",
        f"{'CPU µs per provider token':<34}{'worker':>9}{'redis':>9}{'raw rd':>9}{'net':>9}"
        f"{'script':>9}{'bench':>9}",
        f"{'one worker':<34}{_us(r['realistic_worker_cpu_us_per_token']):>9}"
        f"{_us(r['realistic_redis_cpu_us_per_token']):>9}"
        f"{_us(r['realistic_raw_redis_cpu_us_per_token']):>9}"
        f"{_us(r['realistic_net_cpu_us_per_token']):>9}"
        f"{_us(r['realistic_redis_script_us_per_token']):>9}"
        f"{_us(r['realistic_bench_cpu_us_per_token']):>9}",
        "",
        f"{'latency, publish -> frame visible':<34}{'p50 ms':>9}{'p99 ms':>9}{'p99.9 ms':>10}"
        f"{'max ms':>9}{'unseen':>8}",
        f"{'raw loop (XADD -> XREAD)':<34}{_ms(r['realistic_raw_p50_ms']):>9}"
        f"{_ms(r['realistic_raw_p99_ms']):>9}{_ms(r['realistic_raw_p999_ms']):>10}"
        f"{_ms(r['realistic_raw_max_ms']):>9}{r['realistic_raw_unseen']:>8}",
        f"{'terminus, 1 worker':<34}{_ms(r['realistic_p50_ms']):>9}{_ms(r['realistic_p99_ms']):>9}"
        f"{_ms(r['realistic_p999_ms']):>10}{_ms(r['realistic_max_ms']):>9}"
        f"{r['realistic_unseen']:>8}",
        f"{'added':<34}{_ms(r['realistic_added_p50_ms']):>9}"
        f"{_ms(r['realistic_added_p99_ms']):>9}{_ms(r['realistic_added_p999_ms']):>10}",
        f"{r['realistic_samples']:,} delta frames after {r['realistic_warmup_s']:.0f} s warm-up; "
        f"publishes late by {r['realistic_late_p99_ms']:.1f} ms at p99 "
        f"({r['realistic_raw_late_p99_ms']:.1f} in the raw loop); "
        f"{r['realistic_dead_letters']} dead letters; {r['realistic_redis_forks']} AOF rewrite(s)",
        "p99 ms late of each second: "
        + " ".join(f"{v:.0f}" for v in r["realistic_late_p99_by_second_ms"]),
    ]


def table(r: dict[str, Any]) -> str:
    if "realistic_tokens" in r:
        return "\n".join([machine(r), *realistic(r)])
    if "traces_drain_ratio" in r:
        return "\n".join(header(r) + traces(r))
    drained = "raw_events_per_s" in r  # `--rate` runs the latency phase alone
    middle = throughput(r) + checks(r) if drained else []
    return "\n".join(header(r) + middle + latency(r) + by_rate(r) + verdict(r))

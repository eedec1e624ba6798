"""The soak's report: one JSON object (verdict, counts, faults with their times, throughput,
latency, frames, dead letters, replay, memory, workers, and the series: every second's
throughput and latency, every memory sample), a short text summary, and the same object as a
file for the plot."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from bench.soak.series import Series, percentile
from bench.soak.sunk import failures as sink_failures
from terminus.service.settings import Settings


@dataclass
class Outcome:
    """Everything the end of the run found, to be reported."""

    config: dict[str, Any]
    loaded_s: float
    sessions_left: int
    load: dict[str, Any]
    frames: dict[str, Any]
    dead_letters: dict[str, Any]
    replay: dict[str, Any]
    memory: dict[str, Any]
    workers: dict[str, Any]
    gateway: dict[str, Any]  # the garbage client's and the followers' counts (gateway.py)
    gateway_failures: list[str]
    sink: dict[str, Any] | None = None  # bench/soak/sunk.py; None when the soak ran no sink


def retention_in_build() -> bool:
    """Whether this build reads TERMINUS_RETAIN_MS (the retention branch is merged)."""
    return "retain_ms" in Settings.__struct_fields__


def failures(out: Outcome) -> list[str]:
    """Each check that did not hold, in words."""
    found: list[str] = []
    f = out.frames
    kinds = ("lost", "duplicated", "unexpected", "inversions", "late_extra")
    if any(f[k] for k in kinds):
        found.append("frames: " + ", ".join(f"{f[k]} {k}" for k in kinds))
    logs = ("events_lost", "events_unexpected", "events_inversions")
    if any(f[k] for k in logs):
        found.append("inbound logs: " + ", ".join(f"{f[k]} {k}" for k in logs))
    if out.sessions_left:
        found.append(f"{out.sessions_left} sessions still incomplete when the drain timed out")
    if out.replay["differences"] is None:
        found.append(f"replay --verify did not compare: exit {out.replay['exit']}")
    elif out.replay["differences"] or out.replay["exit"]:
        found.append(
            f"replay --verify: {out.replay['differences']} differences, first: "
            f"{out.replay['first_difference']}"
        )
    d = out.dead_letters
    if d["missing"] or d["wrong_reason_or_bytes"] or d["unexpected"]:
        found.append(
            f"dead letters: {d['missing']} missing, {d['wrong_reason_or_bytes']} wrong, "
            f"{d['unexpected']} unexpected"
        )
    if out.workers["crashed"]:
        found.append(f"{out.workers['crashed']} workers exited without being killed")
    if out.memory["bounded"] is not True:
        found.append(memory_failure(out.memory))
    return found + out.gateway_failures + sink_failures(out.sink)


def memory_failure(memory: dict[str, Any]) -> str:
    """Why memory failed, and whether this build could have passed at all."""
    if memory["bounded"] is None:
        return "memory: too few samples to judge (run longer)"
    growth = memory["used_memory_less_dead"].get("growth")
    keys = memory["keys"].get("growth")
    text = f"memory: not bounded (median growth middle->last third: memory {growth}, keys {keys})"
    if not retention_in_build():
        text += "; expected: this build has no retention, TERMINUS_RETAIN_MS is ignored"
    return text


def build(out: Outcome, series: Series) -> dict[str, Any]:
    """The JSON report of the run."""
    seconds = [s for s in series.seconds() if s.t_s < out.loaded_s]
    latencies = series.all_latencies()
    found = failures(out)
    faults = [msgspec.to_builtins(f) for f in series.faults]
    return {
        "verdict": {"ok": not found, "failures": found},
        "config": out.config | {"retention_in_build": retention_in_build()},
        "loaded_s": round(out.loaded_s, 1),
        "load": out.load,
        "faults": {"counts": dict(Counter(f.kind for f in series.faults)), "injected": faults},
        "throughput": {
            "events_per_s_mean": _mean([s.published for s in seconds]),
            "frames_per_s_mean": _mean([s.frames for s in seconds]),
            "turns_ended_per_s_mean": _mean([s.turns_ended for s in seconds]),
        },
        "latency_ms": {
            "frames": len(latencies),
            "p50": _round(percentile(latencies, 50)),
            "p99": _round(percentile(latencies, 99)),
            "p999": _round(percentile(latencies, 99.9)),
            "max": _round(max(latencies, default=None)),
        },
        "frames": out.frames,
        "dead_letters": out.dead_letters,
        "replay": out.replay,
        "memory": out.memory,
        "workers": out.workers,
        "gateway": out.gateway,
        "sink": out.sink,
        "series": {
            "seconds": msgspec.to_builtins(series.seconds()),
            "memory": msgspec.to_builtins(series.memory),
        },
    }


def write_series(path: Path, report: dict[str, Any]) -> None:
    """The report, with its series, as one JSON file for `bench.soak.plot`."""
    path.write_bytes(msgspec.json.encode(report))


def summary(report: dict[str, Any]) -> str:
    """A few lines for a terminal."""
    v, f, lat, t = report["verdict"], report["frames"], report["latency_ms"], report["throughput"]
    g = report["gateway"]
    lines = [
        f"soak {'OK' if v['ok'] else 'FAILED'} after {report['loaded_s']} s of load",
        f"faults: {report['faults']['counts']}",
        f"events {f['events_published']}: lost {f['events_lost']}, out of order "
        f"{f['events_inversions']} (log repeats of retried publishes: {f['log_repeats']})",
        f"sessions {f['sessions']}, frames {f['frames_observed']}/{f['frames_expected']}: "
        f"lost {f['lost']}, duplicated {f['duplicated']}, unexpected {f['unexpected']}, "
        f"inversions {f['inversions']}, late {f['late_extra']}",
        f"throughput: {t['events_per_s_mean']} events/s, {t['frames_per_s_mean']} frames/s; "
        f"latency p50 {lat['p50']} ms, p99 {lat['p99']} ms, max {lat['max']} ms",
        f"replay --verify: {report['replay']['differences']} differences "
        f"over {report['replay']['entries']} entries",
        f"dead letters: {report['dead_letters']['dead_letters']} "
        f"(missing {report['dead_letters']['missing']}, "
        f"unexpected {report['dead_letters']['unexpected']})",
        f"gateway under garbage: {g['requests']} requests {g['by_status']}, unexpected "
        f"{g['unexpected']}, tracebacks {g['tracebacks']}; followers got {g['frames_followed']} "
        f"frames of {g['followed_sessions']} sessions, longest gap {g['longest_gap_s']} s",
        f"memory bounded: {report['memory']['bounded']} (median growth middle->last third: "
        f"memory {report['memory']['used_memory_less_dead'].get('growth')}, "
        f"keys {report['memory']['keys'].get('growth')})",
    ]
    if report["sink"] is not None:
        lines.append(sink_line(report["sink"]))
    return "\n".join(lines + [f"FAIL {line}" for line in v["failures"]])


def sink_line(sink: dict[str, Any]) -> str:
    """The sink's line of the summary."""
    p = sink["processes"]
    return (
        f"sink: {sink['messages_rows']}/{sink['messages_expected']} messages, "
        f"{sink['turns_rows']}/{sink['turns_expected']} turns; missing "
        f"{sink['messages_missing']}/{sink['turns_missing']}, differing "
        f"{sink['messages_differing']}/{sink['turns_differing']}, extra "
        f"{sink['messages_extra']}/{sink['turns_extra']}; {p['started']} processes, "
        f"{p['killed']} killed, {p['crashed']} crashed"
    )


def _mean(values: list[int]) -> float:
    return round(sum(values) / len(values), 1) if values else 0.0


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)

"""The by-rate figure of docs/performance.md: added latency (p50, p99, p99.9) and CPU per event
(worker, Redis) against the publishing rate, with the drain's CPU and the 10 ms bound marked, and
the peer's (bench/peer) p99 and CPU at the rates it was measured.

    pip install -e '.[bench]'     # matplotlib: only the plots need it
    python -m bench.e2e --json > e2e.json
    python -m bench.e2e.plot e2e.json docs/performance-by-rate.svg
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import msgspec


def draw(report: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report["by_rate"]
    rates = [r["rate"] / 1000 for r in rows]
    fig, (lat, cpu) = plt.subplots(1, 2, figsize=(11, 4.2))
    for key, label in (("p50_ms", "p50"), ("p99_ms", "p99"), ("p999_ms", "p99.9")):
        lat.plot(rates, [max(r[key], 0.01) for r in rows], marker="o", label=label)
    peer = [r for r in rows if r.get("peer_p99_ms") is not None]
    if peer:
        lat.plot(
            [r["rate"] / 1000 for r in peer],
            [max(r["peer_p99_ms"], 0.01) for r in peer],
            marker="s",
            linestyle=":",
            color="black",
            label="p99, peer (FastStream)",
        )
    lat.axhline(10, color="gray", linestyle="--", linewidth=1, label="10 ms")
    lat.set(xlabel="events/s (thousands)", ylabel="added latency (ms)", xscale="log", yscale="log")
    lat.set_title("publish-to-visible latency added")
    lat.legend()
    worker = [r["worker_cpu_us_per_event"] for r in rows]
    redis = [r["redis_cpu_us_per_event"] for r in rows]
    cpu.plot(rates, worker, marker="o", label="worker")
    cpu.plot(rates, redis, marker="o", label="Redis")
    cpu.plot(rates, [w + r for w, r in zip(worker, redis, strict=True)], marker="o", label="both")
    if peer:
        cpu.plot(
            [r["rate"] / 1000 for r in peer],
            [r["peer_cpu_us_per_event"] for r in peer],
            marker="s",
            linestyle=":",
            color="black",
            label="peer process",
        )
    drain = report["drain_cpu_us_per_event"]
    cpu.axhline(drain, color="gray", linestyle="--", linewidth=1, label="both, at drain")
    cpu.set(xlabel="events/s (thousands)", ylabel="CPU µs per event", xscale="log", yscale="log")
    cpu.set_title("CPU per event, one worker")
    cpu.legend()
    fig.tight_layout()
    fig.savefig(out)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        sys.exit("usage: python -m bench.e2e.plot REPORT.json OUT.svg")
    draw(msgspec.json.decode(Path(args[0]).read_bytes()), Path(args[1]))


if __name__ == "__main__":
    main()

"""The soak's figure: throughput, latency (p50/p99 per second) and Redis memory over time, with
every injected fault marked by kind (a band for the time it lasted, a line for an instant).

    pip install -e '.[bench]'     # matplotlib: only this script needs it
    python -m bench.soak.plot soak-report.json docs/reliability-soak.svg

Reads the report `python -m bench.soak --series FILE` writes (or `--json` prints). matplotlib,
not hand-written SVG: axes, ticks, a log scale, legends and both SVG and PNG output are its job
and would be most of ours.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any, Final

import msgspec

COLORS: Final = {
    "kill_worker": "tab:red",
    "pause_worker": "tab:orange",
    "restart_redis": "tab:purple",
    "blackhole": "tab:gray",
    "malformed": "tab:olive",
}
LABELS: Final = {
    "kill_worker": "worker SIGKILL",
    "pause_worker": "worker SIGSTOP past lease",
    "restart_redis": "Redis SIGKILL + restart",
    "blackhole": "network blackhole",
    "malformed": "malformed entries",
}
INSTANT_S: Final = 0.5  # a fault shorter than this is drawn as a line


def load(path: Path) -> dict[str, Any]:
    """The report a soak wrote."""
    data: dict[str, Any] = msgspec.json.decode(path.read_bytes())
    return data


def mark_faults(axes: Any, faults: list[dict[str, Any]]) -> None:
    """Each fault on every panel; one legend entry per kind."""
    seen: set[str] = set()
    for fault in faults:
        kind, start, end = fault["kind"], fault["start_s"], fault["end_s"]
        label = None if kind in seen else LABELS.get(kind, kind)
        seen.add(kind)
        color = COLORS.get(kind, "black")
        for n, ax in enumerate(axes):
            if end - start >= INSTANT_S:
                ax.axvspan(start, end, color=color, alpha=0.18, label=label if n == 0 else None)
            else:
                ax.axvline(start, color=color, lw=1, ls="--", label=label if n == 0 else None)


def throughput(ax: Any, seconds: list[dict[str, Any]]) -> None:
    """Events published and frames read, per second."""
    t = [s["t_s"] for s in seconds]
    ax.plot(t, [s["published"] for s in seconds], lw=1, label="events published/s")
    ax.plot(t, [s["frames"] for s in seconds], lw=1, label="frames read/s")
    ax.set_ylabel("per second")


def latency(ax: Any, seconds: list[dict[str, Any]]) -> None:
    """p50 and p99 frame latency per second, on a log scale."""
    t = [s["t_s"] for s in seconds]
    for key in ("p50_ms", "p99_ms"):
        # NaN where no frame was read: a gap in the line, not a slope across the outage.
        values = [math.nan if s[key] is None else s[key] for s in seconds]
        ax.plot(t, values, lw=1, marker=".", markersize=2, label=key.removesuffix("_ms"))
    ax.set_yscale("log")
    ax.set_ylabel("frame latency (ms)")


def memory(ax: Any, samples: list[dict[str, Any]]) -> Any:
    """used_memory less dead letters on `ax`, the key count on a twin axis (returned)."""
    t = [m["t_s"] for m in samples]
    net = [(m["used_memory"] - m["dead_bytes"]) / 2**20 for m in samples]
    ax.plot(t, net, lw=1, label="used_memory less dead letters (MiB)")
    ax.set_ylabel("Redis MiB")
    keys = ax.twinx()
    keys.plot(t, [m["keys"] for m in samples], lw=1, color="tab:green", label="keys")
    keys.set_ylabel("keys")
    keys.legend(loc="upper right", fontsize=7)
    return keys


def draw(data: dict[str, Any], out: Path) -> None:
    """The three panels with the faults marked, saved to `out` (SVG or PNG by its suffix)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, sharex=True, figsize=(12, 9), height_ratios=[2, 2, 1.3])
    throughput(axes[0], data["series"]["seconds"])
    latency(axes[1], data["series"]["seconds"])
    memory(axes[2], data["series"]["memory"])
    axes[2].set_xlabel("seconds since the load began")
    mark_faults(axes, data["faults"]["injected"])
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=7, ncol=2)
    verdict = data["verdict"]
    fig.suptitle(f"terminus chaos soak: {'OK' if verdict['ok'] else 'FAILED'}")
    fig.tight_layout()
    fig.savefig(out)


def main(argv: list[str] | None = None) -> None:
    """python -m bench.soak.plot REPORT.json OUT.svg"""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        raise SystemExit("usage: python -m bench.soak.plot SERIES.json OUT.svg|OUT.png")
    draw(load(Path(args[0])), Path(args[1]))


if __name__ == "__main__":
    main()

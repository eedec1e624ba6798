"""The by-rate table's arithmetic (bench/e2e/by_rate.py, bench/e2e/report.py): the floor's net
CPU leaves out the raw loop's Redis exactly as terminus's net does, so the two can be divided."""

from __future__ import annotations

from typing import Any

from bench.e2e.by_rate import row
from bench.e2e.report import floor_rows


def latency_report(floor: bool) -> dict[str, Any]:
    report: dict[str, Any] = {
        "latency_achieved_events_per_s": 1000.0,
        "latency_worker_cpu_us_per_event": 150.0,
        "latency_redis_cpu_us_per_event": 130.0,
        "baseline_redis_cpu_us_per_event": 50.0,
        "baseline_p99_ms": 1.0,
        "latency_machine_busy_cores": 0.4,
    }
    for name in ("p50", "p99", "p999"):
        report[f"{name}_ms"], report[f"baseline_{name}_ms"] = 13.0, 1.0
    if floor:
        report |= {"floor_p99_ms": 13.5, "floor_cpu_us_per_event": 70.0}
        report["floor_redis_cpu_us_per_event"] = 80.0
    return report


def test_the_floor_net_leaves_out_the_raw_loops_redis_as_terminus_net_does() -> None:
    measured = row(1000.0, latency_report(floor=True))
    assert measured["floor_net_cpu_us_per_event"] == 100.0  # 70 + 80 - 50
    assert measured["net_cpu_us_per_event"] == 230.0  # 150 + 130 - 50
    assert measured["net_over_floor"] == 2.3  # 230 / 100
    assert measured["floor_p99_ms"] == 12.5  # added over the raw loop's p99


def test_the_floor_rows_appear_only_where_the_floor_was_measured() -> None:
    rows = [row(1000.0, latency_report(floor=True)), row(5000.0, latency_report(floor=False))]
    assert rows[1]["floor_net_cpu_us_per_event"] is None
    assert rows[1]["net_over_floor"] is None
    lines = floor_rows(rows, drain=20.0)
    assert len(lines) == 4  # a blank line, the title, the header and the one measured rate
    assert lines[-1].split() == ["1,000", "12.5", "70.0", "80.0", "100", "5.0", "2.3"]
    assert floor_rows([rows[1]], drain=20.0) == []

"""The per-batch benchmark of the worker's own work (bench/fold): it folds the whole log at each
size, so a fold that lost or refused entries would show here, not print a figure."""

from __future__ import annotations

import argparse

import pytest

import bench.fold.__main__ as bench_fold
from bench.fold.__main__ import entries_of, measure, one_pass, sizes, table
from terminus.service.settings import Settings


def tiny(**overrides: object) -> argparse.Namespace:
    values: dict[str, object] = {"sizes": [1, 4], "turns": 6, "deltas": 5, "seed": 1, "repeat": 1}
    return argparse.Namespace(**{**values, **overrides})


def test_every_size_gets_its_figures_and_the_largest_sets_the_floor() -> None:
    report = measure(tiny())
    rows = report["rows"]
    assert [r["size"] for r in rows] == [1, 4]
    assert rows[0]["batches"] == report["events"]
    assert rows[1]["batches"] == -(-report["events"] // 4)
    assert all(r["us_per_event"] > 0 and r["us_per_batch"] > 0 for r in rows)
    assert rows[-1]["fixed_us_per_batch"] == 0
    assert len(table(report).splitlines()) == 2 + len(rows)


def test_a_pass_folds_every_entry_into_a_finished_turn() -> None:
    """The timed pass is a worker's: every turn of the workload ends, none is dead-lettered."""
    done = one_pass(entries_of(tiny()), 4, Settings())
    assert (done.dead, done.open_turns) == (0, 0)
    assert set(done.spent) == {"decode", "fold", "encode"}
    assert all(seconds > 0 for seconds in done.spent.values())


def test_a_pass_that_leaves_a_turn_open_is_no_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cut the log short of every turn's end: the measure refuses rather than print it."""
    entries = entries_of(tiny())
    monkeypatch.setattr(bench_fold, "entries_of", lambda _: entries[: len(entries) // 2])
    with pytest.raises(RuntimeError, match="turns left open"):
        measure(tiny())


@pytest.mark.parametrize("text", ["0", "", "3,-1"])
def test_batch_sizes_are_positive(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        sizes(text)

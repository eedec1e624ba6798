"""Every recorded transcript through `terminus simulate`, whole: each fixture on disk has its
expected outcome, and reaches it (state, the last attempt's outcome and reason, finish reason,
text)."""

from __future__ import annotations

import pytest
from simulated_fixtures import EXPECTED, FIXTURES, provider_of, run, text_of


def test_every_fixture_has_an_expected_outcome() -> None:
    on_disk = {
        str(p.relative_to(FIXTURES))
        for p in FIXTURES.rglob("*")
        if p.is_file() and p.name != "SOURCES.md"
    }
    assert on_disk == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_outcome(name: str) -> None:
    state, outcome_kind, why, finish, snippet = EXPECTED[name]
    outcome = run([FIXTURES / name], provider_of(name))
    last = outcome.attempts[-1]
    assert (outcome.state, last.outcome, last.finish_reason) == (state, outcome_kind, finish)
    assert why == (last.error.type if last.error else last.reason)
    assert snippet in text_of(outcome)
    if state == "finished":
        assert outcome.message is not None
        assert outcome.updates[-1].__struct_config__.tag == "turn_finished"
    else:
        assert outcome.message is None

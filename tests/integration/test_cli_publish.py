"""`terminus publish`, run in process against a real Redis: a turn's transcripts are written to
its session's partition as the events `terminus simulate` folds; a fresh turn is named; a bad
file publishes nothing."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from cli_support import DEMO, SESSION, P, entries, lines, set_env, store_at
from redis import Redis

from terminus.events.codec import decode_event
from terminus.events.inbound import AttemptStarted, InboundEvent, TurnStarted
from terminus.service.cli.main import main
from terminus.service.cli.publish import Published
from terminus.service.cli.simulate import simulate
from terminus.service.keys import Keys, partition_of
from terminus.statemachines.fold import evolve
from terminus.statemachines.outputs import Outputs
from terminus.statemachines.turn import Turn


@pytest.fixture
def store(redis_url: str, prefix: str) -> Iterator[Redis]:
    """A sync client for setting up data; every key under `prefix` is unlinked afterwards."""
    with store_at(redis_url, prefix) as client:
        yield client


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, redis_url: str, prefix: str) -> None:
    set_env(monkeypatch, redis_url, prefix)


def fold(events: list[InboundEvent]) -> tuple[Turn, Outputs]:
    turn: Turn | None = None
    out = Outputs()
    for event in events:
        turn, _ = evolve(turn, event, out=out)
    assert turn is not None
    return turn, out


# A turn's transcripts per provider: the first attempt is retried, the second one finishes.
ANTHROPIC_TURN = [
    "http-429-rate-limit-error-recorded-sdk-python.json",
    "text-after-429-retries-recorded-sdk-python.sse",
]
OPENAI_CHAT_TURN = ["synthesized-empty-finish.jsonl", "text-stop-usage-done-recorded-fantasy.sse"]
SCENARIOS = [("anthropic", ANTHROPIC_TURN), ("openai-chat", OPENAI_CHAT_TURN)]


@pytest.mark.usefixtures("env")
@pytest.mark.parametrize(("provider", "names"), SCENARIOS)
def test_publish_writes_the_turn_to_its_partition(
    store: Redis, prefix: str, capsys: pytest.CaptureFixture[str], provider: str, names: list[str]
) -> None:
    files = [DEMO / name for name in names]
    argv = ["publish", "--provider", provider, "--session", SESSION, "--turn", "t-pub", "--json"]
    assert main([*argv, *map(str, files)]) == 0
    done = msgspec.json.decode(capsys.readouterr().out, type=Published)
    partition = partition_of(SESSION, P)
    assert (done.session_id, done.turn_id, done.partition) == (SESSION, "t-pub", partition)
    log = entries(store, Keys(partition, prefix).inbound)
    assert len(log) == done.entries
    assert sum(store.xlen(Keys(p, prefix).inbound) > 0 for p in range(P)) == 1
    events = [decode_event(fields[b"e"]) for _, fields in log]
    assert isinstance(events[0], TurnStarted)
    assert [e.attempt for e in events if isinstance(e, AttemptStarted)] == [1, 2]
    turn, out = fold(events)
    expected = simulate(files, provider=provider, session_id=SESSION, turn_id="t-pub")
    assert turn.state.value == expected.state == "finished"
    assert out.frames == expected.updates


@pytest.mark.usefixtures("env")
def test_publish_text_names_a_fresh_turn(store: Redis, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["publish", "--provider", "anthropic", "--session", SESSION]
    assert main([*argv, str(DEMO / "text-recorded-fantasy.sse")]) == 0
    out = capsys.readouterr().out
    assert re.fullmatch(
        r"published \d+ entries of turn [0-9a-f]{32} \(session s-views\) to partition \d\n", out
    )


@pytest.mark.usefixtures("env")
def test_publish_of_a_bad_file_publishes_nothing(
    store: Redis, prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.sse"
    argv = ["publish", "--provider", "anthropic", "--session", SESSION]
    assert main([*argv, str(DEMO / "text-recorded-fantasy.sse"), str(missing)]) == 1
    [line] = lines(capsys.readouterr().err)
    assert line.startswith(f"terminus publish: {missing}: cannot read")
    assert store.xlen(Keys(partition_of(SESSION, P), prefix).inbound) == 0


@pytest.mark.usefixtures("env")
def test_publish_to_a_log_redis_refuses_says_so_in_one_line(
    store: Redis, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hostile entry at the largest possible id leaves a log nothing can be appended to: the
    command says what Redis answered, as one line and status 1, not as a traceback."""
    inbound = Keys(partition_of(SESSION, P), prefix).inbound
    store.xadd(inbound, {"e": b"{}"}, id="18446744073709551615-18446744073709551615")
    argv = ["publish", "--provider", "anthropic", "--session", SESSION]
    assert main([*argv, str(DEMO / "text-recorded-fantasy.sse")]) == 1
    [line] = lines(capsys.readouterr().err)
    assert line.startswith("terminus publish: Redis refused: ")
    assert "exhausted the last possible ID" in line
    assert store.xlen(inbound) == 1

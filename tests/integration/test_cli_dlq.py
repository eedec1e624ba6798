"""`terminus dlq`, run in process against a real Redis: `list` keeps raw bytes across partitions,
`requeue` by id or all copies dead letters back to their inbound log and keeps them, and a
requeue of nothing known is an error."""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
import pytest
from cli_support import add_dead, entries, lines, set_env, store_at
from redis import Redis

from terminus.service.cli.main import main
from terminus.service.keys import Keys
from terminus.service.sdk import views


@pytest.fixture
def store(redis_url: str, prefix: str) -> Iterator[Redis]:
    """A sync client for setting up data; every key under `prefix` is unlinked afterwards."""
    with store_at(redis_url, prefix) as client:
        yield client


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, redis_url: str, prefix: str) -> None:
    set_env(monkeypatch, redis_url, prefix)


@pytest.mark.usefixtures("env")
def test_dlq_list_json_keeps_raw_bytes_across_partitions(
    store: Redis, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    first = add_dead(store, 3, prefix, b"\xff\x00 not json")
    second = add_dead(store, 1, prefix, b"{}")
    assert main(["dlq", "list", "--json"]) == 0
    letters = [
        msgspec.json.decode(x, type=views.DeadLetter) for x in lines(capsys.readouterr().out)
    ]
    assert [(d.partition, d.id, d.raw) for d in letters] == [
        (1, second, b"{}"),
        (3, first, b"\xff\x00 not json"),
    ]
    assert main(["dlq", "list", "--partition", "3"]) == 0
    [line] = lines(capsys.readouterr().out)
    assert line.startswith(f"partition 3 {first} <- ")


@pytest.mark.usefixtures("env")
def test_dlq_requeue_by_id_or_all(
    store: Redis, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    wanted = add_dead(store, 3, prefix, b"\xff raw")
    add_dead(store, 1, prefix, b"{}")
    assert main(["dlq", "requeue", wanted, "--partition", "3"]) == 0
    assert capsys.readouterr().out == "requeued 1 dead letter\n"
    [(_, fields)] = entries(store, Keys(3, prefix).inbound)
    assert fields == {b"e": b"\xff raw", b"requeued_from": wanted.encode()}
    assert main(["dlq", "requeue", "--all"]) == 0
    assert capsys.readouterr().out == "requeued 2 dead letters\n"
    assert store.xlen(Keys(3, prefix).dead) == 1, "requeue keeps the dead letter"


@pytest.mark.usefixtures("env")
@pytest.mark.parametrize("argv", [["9-9"], [], ["--all", "9-9"], ["--all", "--partition", "4"]])
def test_dlq_requeue_of_nothing_known_is_an_error(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["dlq", "requeue", *argv]) == 1
    captured = capsys.readouterr()
    assert len(lines(captured.err)) == 1
    assert captured.err.startswith("terminus dlq: ")

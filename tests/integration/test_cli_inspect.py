"""`terminus inspect TURN` over a turn a real worker committed: cut, retried, then finished."""

from __future__ import annotations

import asyncio
import re
from typing import Final

import msgspec
import pytest
from redis.asyncio import Redis
from serving import running_worker
from test_timeline import PARTITIONS, retried_turn, settled

from terminus.service.cli.main import main
from terminus.service.fold.releases import TOMBSTONE
from terminus.service.gateway.timeline import Timeline, timeline
from terminus.service.keys import keys_for_session
from terminus.service.sdk.producer import Producer
from terminus.service.settings import Settings

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster

SESSION: Final = "s-inspect"
TURN: Final = "t-inspect"
ANSI: Final = re.compile(r"\x1b\[")


@pytest.fixture
async def retried(
    redis: Redis, redis_env: None, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> Timeline:
    """Attempt 1 is cut (no terminal proof), attempt 2 finishes; the worker is stopped before
    the test looks, and the commands are pointed at its keys. Yields the turn's timeline."""
    monkeypatch.setenv("TERMINUS_PREFIX", prefix)
    monkeypatch.setenv("TERMINUS_PARTITIONS", str(PARTITIONS))
    async with running_worker(redis, Settings(prefix=prefix, partitions=PARTITIONS, block_ms=100)):
        await retried_turn(Producer(redis, partitions=PARTITIONS, prefix=prefix), SESSION, TURN)
        await settled(redis, prefix, SESSION, TURN)
    # Read again once the worker is stopped: the attempt's close, after its proof, may have
    # been applied after `settled` looked (it counts as a late event in the snapshot).
    found = await timeline(redis, SESSION, TURN, PARTITIONS, prefix)
    assert found is not None
    return found


async def inspect(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run `terminus inspect` in a thread (it runs its own event loop); status, out, err."""
    status = await asyncio.to_thread(main, ["inspect", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def positions(text: str, wanted: list[str]) -> list[int]:
    """Where each of `wanted` first occurs in `text`, searching on from the previous one."""
    found, start = [], 0
    for needle in wanted:
        at = text.find(needle, start)
        assert at >= 0, f"{needle!r} missing after offset {start}:\n{text}"
        found.append(at)
        start = at + len(needle)
    return found


async def test_the_human_output_tells_the_whole_story_in_order(
    retried: Timeline, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = await inspect(capsys, TURN, "--session", SESSION)
    assert (status, err) == (0, "")
    assert not ANSI.search(out), "no escape codes when stdout is not a terminal"
    assert re.search(r"^state +finished *$", out, re.MULTILINE)
    assert re.search(r"^session +s-inspect *$", out, re.MULTILINE)
    assert re.search(r"^usage +in=7 out=3 *$", out, re.MULTILINE)
    changes = [i.detail for i in retried.items if i.kind == "transition"]
    path = ["streaming", "truncated", "retrying", "streaming", "awaiting_terminal", "finished"]
    assert [c["dest"] for c in changes] == path
    story = [f"{c['source']} -> {c['dest']} ({c['trigger']})" for c in changes]
    timeline_part = out[out.index("timeline") :]
    positions(timeline_part, story)
    # Frames follow in their own order; one commit can hold several state changes and frames
    # with the same millisecond, so frames are not placed between the changes of one commit.
    retry = next(i for i in retried.items if i.kind == "retrying")
    delay = retry.detail["delay_ms"]
    frames = [
        "discarded parts a1 (missing_terminal)",
        f"retry as attempt 2 of {retry.detail['max_attempts']} in {delay} ms",
        "committed message ",
        "end: end_turn, usage in=7 out=3",
    ]
    positions(timeline_part, frames)
    assert re.search(r"^ *1\.1 +truncated +missing_terminal", out, re.MULTILINE)
    assert re.search(r"^ *1\.2 +finished +stop", out, re.MULTILINE)
    assert "text and reasoning chunks per step.attempt: 1.1=2, 1.2=3" in out


async def test_json_is_the_timeline_the_gateway_serves(
    redis: Redis, prefix: str, retried: Timeline, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = await inspect(capsys, TURN, "--session", SESSION, "--json")
    assert status == 0
    assert out.endswith("}\n")
    assert out.count("\n") == 1
    assert msgspec.json.decode(out, type=Timeline) == retried
    assert msgspec.json.decode(out, type=Timeline) == await timeline(
        redis, SESSION, TURN, PARTITIONS, prefix
    )


async def test_without_session_the_turn_is_found_by_its_id(
    retried: Timeline, capsys: pytest.CaptureFixture[str]
) -> None:
    given = await inspect(capsys, TURN, "--session", SESSION)
    looked_up = await inspect(capsys, TURN)
    assert looked_up == given
    assert "finished" in looked_up[1]
    status, out, _ = await inspect(capsys, TURN, "--json")
    assert (status, msgspec.json.decode(out, type=Timeline)) == (0, retried)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["t-none"], "terminus inspect: no turn 't-none'"),
        (["t-none", "--json"], "terminus inspect: no turn 't-none'"),
        (
            [TURN, "--session", "s-other"],
            f"terminus inspect: no turn '{TURN}' in session 's-other'",
        ),
    ],
)
async def test_an_unknown_turn_is_one_line_on_stderr_and_status_1(
    retried: Timeline, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    status, out, err = await inspect(capsys, *argv)
    assert (status, out) == (1, "")
    assert err.splitlines() == [message]


async def test_an_unreadable_snapshot_is_one_line_on_stderr_and_status_1(
    redis: Redis, prefix: str, retried: Timeline, capsys: pytest.CaptureFixture[str]
) -> None:
    await redis.set(keys_for_session(SESSION, PARTITIONS, prefix).turn(TURN), b"\x80")
    status, out, err = await inspect(capsys, TURN, "--session", SESSION)
    assert (status, out) == (1, "")
    [line] = err.splitlines()
    assert line.startswith(f"terminus inspect: turn '{TURN}': unreadable snapshot: ")


@pytest.mark.parametrize("argv", [[TURN], [TURN, "--session", SESSION]])
async def test_an_archived_turn_says_where_it_went(
    redis: Redis,
    prefix: str,
    retried: Timeline,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
) -> None:
    await redis.set(keys_for_session(SESSION, PARTITIONS, prefix).turn(TURN), TOMBSTONE)
    status, out, err = await inspect(capsys, *argv)
    assert (status, out) == (1, "")
    assert err.splitlines() == [
        f"terminus inspect: turn '{TURN}' was archived by retention: its events are in the"
        " archive (TERMINUS_ARCHIVE_DIR)"
    ]

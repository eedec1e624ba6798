"""Golden logs replay identically forever (tests/golden/README.md, DESIGN invariant 4).

Each `tests/golden/v*/` holds an inbound log recorded once, through the producer SDK, and the
projections a worker committed for it. Loaded with its original entry ids into a fresh prefix and
rebuilt by `terminus.service.cli.replay`, it must give exactly those projections: today's code
reads every contract version ever recorded, and folds it to the same bytes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from golden.dump import first_difference
from golden.inbound import read_entries, read_projections, replay_dir, versions
from redis.asyncio import Redis

from terminus.events.codec import sniff_format
from terminus.events.versions import CURRENT

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster


def test_every_contract_version_up_to_the_current_one_has_a_golden_log() -> None:
    assert [d.name for d in versions()] == [f"v{n}" for n in range(1, CURRENT + 1)]


@pytest.mark.parametrize("directory", versions(), ids=lambda d: d.name)
async def test_the_golden_log_replays_to_its_recorded_projections(
    redis: Redis, prefix: str, directory: Path
) -> None:
    expected = read_projections(directory)
    replayed = await replay_dir(redis, directory, prefix, f"{prefix}:replay")
    difference = first_difference(expected, replayed)
    assert difference is None, difference
    assert replayed == expected


@pytest.mark.parametrize("directory", versions(), ids=lambda d: d.name)
def test_the_golden_log_has_both_encodings_and_dead_letters(directory: Path) -> None:
    payloads = [dict(e.fields).get("e") for e in read_entries(directory)]
    formats = {sniff_format(p.encode()) for p in payloads if p and not p.startswith("base64:")}
    assert formats == {"json"}
    assert any(p and p.startswith("base64:") for p in payloads)  # msgpack: not UTF-8
    dead = [v for k, v in read_projections(directory).items() if k.endswith(":dead")]
    reasons = [f["reason"] for d in dead for f in d["stream"]]
    assert any("is newer than this build reads" in r for r in reasons)
    assert any(r.startswith("illegal: ") for r in reasons)

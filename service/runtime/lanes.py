"""A worker's lanes: pumps stepping disjoint sets of its partitions, as many in use as the load
needs, up to `TERMINUS_LANES`.

Why several: a lane folds a round's batches, then waits while Redis commits them; with one lane
the worker idles while Redis commits, and Redis while the worker folds. Draining a backlog, 8
lanes took one worker from 0.23 to 0.37 of the raw loop (docs/performance.md). Why not always
all: at light load each lane paces and rounds on its own, and a round costs about the same
whatever it carries, so 8 lanes spent a third more CPU per event at 1k events/s than 2, and one
lane 10-15% less than 2.

So the lanes follow the load. One lane while its rounds stay light; twice as many each time the
lanes in use cannot keep up: a lane's rounds came back full (`Pump.full`: a quarter of a batch,
where the pump stops lingering) three times in a row. One full round proves little: the round
after it goes at once, without its linger, and at a load the lane carries it reads much less.
Back to as many as before once the rate the worker reads at, over a window of `settle_s`, falls
under half the rate it read at when they were added: fewer lanes then carry the load with a
margin of two, so that they do not flap at the edge. (A test on the rounds themselves would not
do: fewer lanes make longer rounds, which carry more each; the first version of this module
gathered on the rounds' size, and flapped between one lane and eight at 30,000 events/s.)

An owner changes lanes only at the top of its lane's round (`balance`, called by the pump): none
of that pump's owners has a request in flight then, the reply of its last one has been taken, and
a folded batch goes with the owner to be committed by the other lane, like the batch of an owner
just added. An owner starting or stopping stays where it is. Which lane an owner belongs on is
its rank among the worker's partitions, modulo the lanes in use, so the partitions spread evenly
whichever ones the pool gave this worker.
"""

from __future__ import annotations

import logging
from time import monotonic
from typing import Final

from redis.asyncio import Redis

from terminus.service.metrics.worker import WorkerMetrics
from terminus.service.runtime.owner import PartitionOwner
from terminus.service.runtime.pump import Breaks, Pump
from terminus.service.settings import Settings

log = logging.getLogger("terminus.lanes")

FULL_ROUNDS: Final = 3  # full rounds in a row on a lane: the lanes in use cannot keep up
SETTLE_S: Final = 1.0  # the window over which the rate the worker reads at is measured


class Lanes:
    """The pumps of one worker, and which of them each owner belongs on."""

    def __init__(
        self,
        redis: Redis,
        settings: Settings,
        metrics: WorkerMetrics | None = None,
        settle_s: float = SETTLE_S,
    ) -> None:
        self.metrics = metrics if metrics is not None else WorkerMetrics()
        self.settle_s = settle_s
        breaks = Breaks()  # one lane's broken connection makes every lane start over
        self.pumps = [Pump(redis, settings, self.balance, breaks) for _ in range(settings.lanes)]
        self.active = 1  # lanes in use: the first `active` pumps
        self.moves = 0  # owners handed from one lane to another, since the start
        self._since, self._read = monotonic(), 0  # entries every lane read since `_since`
        self._rate = 0.0  # entries per second, over the last whole window
        # For each doubling, the lanes before it and the rate read at when it came.
        self._doublings: list[tuple[int, float]] = []
        # Partition -> its lane, and the partitions held and lanes in use it was made for.
        self._places: dict[int, Pump] = {}
        self._placed_for: tuple[frozenset[int], int] = (frozenset(), 0)

    def add(self, owner: PartitionOwner) -> None:
        self._lane_of(owner.partition).add(owner)

    def holder(self, partition: int) -> Pump | None:
        return next((p for p in self.pumps if partition in p.owners), None)

    def drop(self, partition: int) -> None:
        """End an owner at once, without a last commit: its lease is gone."""
        pump = self.holder(partition)
        if pump is not None:
            pump.drop(partition)

    async def retire(self, partition: int) -> None:
        """Commit the owner's batch in hand, then end it; returns once it has ended."""
        pump = self.holder(partition)
        if pump is not None:
            await pump.retire(partition)

    def balance(self, pump: Pump) -> None:
        """At the top of `pump`'s round: follow the load, then hand over the owners that belong
        on another lane."""
        self._follow(pump)
        if self.active == 1 and pump is self.pumps[0]:
            return  # every owner belongs here: nothing to look at on the light path
        places = self._placement()
        for owner in list(pump.owners.values()):
            # `renewing`: running on its lease, neither starting nor stopping.
            if not owner.renewing:
                continue
            lane = places[owner.partition]
            if lane is not pump and not lane.stopping:
                pump.release(owner)
                lane.add(owner)
                self.moves += 1

    def _follow(self, pump: Pump) -> None:
        now = monotonic()
        self._read += pump.last_read
        elapsed = now - self._since
        if pump.full_rounds >= FULL_ROUNDS and self.active < len(self.pumps):
            # The window so far or the last whole one, whichever read faster. A window just
            # begun may rate a burst too high: the lanes then go early, and come back with a
            # rate measured on fewer of them.
            rate = max(self._read / max(elapsed, 0.001), self._rate)
            self._doublings.append((self.active, rate))
            self._use(min(self.active * 2, len(self.pumps)), now)
            return
        if elapsed < self.settle_s:
            return
        self._rate = self._read / elapsed
        if self._doublings and self._rate < self._doublings[-1][1] / 2:
            lanes, _ = self._doublings.pop()
            self._use(lanes, now)
        else:
            self._window(now)

    def _use(self, lanes: int, now: float) -> None:
        log.debug("lanes: %s in use, was %s", lanes, self.active)
        self.metrics.lanes_changed(lanes)
        self.active = lanes
        self._window(now)
        for pump in self.pumps:
            pump.full_rounds = 0  # full rounds count again from the change

    def _window(self, now: float) -> None:
        self._since, self._read = now, 0

    def _lane_of(self, partition: int) -> Pump:
        if self.active == 1:
            return self.pumps[0]
        return self._placement(partition)[partition]

    def _placement(self, joining: int | None = None) -> dict[int, Pump]:
        """Partition -> its lane, for the partitions the lanes hold (and one `joining`): made
        again only when those or the lanes in use changed."""
        held = frozenset(p for pump in self.pumps for p in pump.owners)
        if joining is not None:
            held |= {joining}
        if self._placed_for != (held, self.active):
            lanes = self.pumps[: self.active]
            self._places = {p: lanes[n % self.active] for n, p in enumerate(sorted(held))}
            self._placed_for = (held, self.active)
        return self._places

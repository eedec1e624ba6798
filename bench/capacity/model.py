"""The capacity model: from a demand (concurrent turns, tokens/s each, subscribers, retention) and
the costs measured on a machine, the workers, Redis shards, GB and gateway cores it needs.
Pure: no I/O, no clock; `bench/capacity/measure.py` measures the inputs.

How it reasons (docs/capacity.md):
1. The provider tokens/s of the whole platform, M = turns x tokens/s per turn.
2. Workers: a worker's CPU per token falls as its load grows (its rounds carry more entries),
   so the most one worker can carry within `core_share` of a core is the load r* at which
   r* x cost(r*) = core_share; workers = ceil(M / r*), each then at M / workers.
3. Redis: a commit's cost is set by the entries it carries, that is by the worker's load, so
   Redis's CPU is M x redis_cost(M / workers), spread over shards of `core_share` of a core each
   (Redis runs commands on one thread). Shards are also added for memory. Costs are those
   measured on a Redis Cluster where the inputs have them: on this machine a cluster's client
   and replicas cost 1.5-1.9x as much per token as one Redis (docs/capacity.md).
4. Memory: what Redis holds is what the retention window holds, M x bytes per token x window
   (every key kind: log, frames, snapshots, messages, transitions...), times `memory_overhead`
   (allocator, buffers, the fork of an AOF rewrite).
5. Gateway: each frame is sent once per subscriber, at the measured CPU per frame delivered.

Costs between two measured loads are interpolated on log-log axes; below the lowest, the first
segment's slope goes on (light loads cost more a token); above the highest, cost per token stays
as measured there, so resources grow linearly with load (no economy of scale is assumed beyond
what was seen). The curve is made monotone first: cost per token never rises with load, and the
CPU a load takes never falls as it grows (a measured point breaking either is noise, and is
moved to the nearest value that keeps both).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

import msgspec

MAX_SHARDS_PER_CLUSTER: Final = 1000  # Redis Cluster's stated practical ceiling (cluster spec)
MAX_PARTITIONS: Final = 16384  # a partition is one hash slot


class CostPoint(msgspec.Struct, frozen=True, kw_only=True):
    """CPU per provider token measured at one load (one worker, one Redis)."""

    turns: float  # turns in flight, on average
    tokens_per_s: float
    worker_us_per_token: float
    redis_us_per_token: float


class Inputs(msgspec.Struct, frozen=True, kw_only=True):
    """What the model needs from a machine; `python -m bench.capacity --measure` writes it."""

    costs: tuple[CostPoint, ...]  # one Redis
    cluster_costs: tuple[CostPoint, ...] = ()  # a local 3-shard Redis Cluster, the same loads
    bytes_per_token: dict[str, float]  # by key kind, the workload's turns amortized
    bytes_per_turn: dict[str, float]
    tokens_per_turn: float
    frames_per_token: float
    gateway_us_per_frame: float  # per frame delivered to one subscriber
    measured: dict[str, object] = {}  # where and how: machine, commands, dates

    @property
    def total_bytes_per_token(self) -> float:
        return sum(self.bytes_per_token.values())


class Demand(msgspec.Struct, frozen=True, kw_only=True):
    """What a platform asks for."""

    concurrent_turns: float
    tokens_per_s_per_turn: float = 50.0
    subscribers_per_session: float = 1.0
    retain_s: float = 600.0  # TERMINUS_RETAIN_MS / 1000

    @property
    def tokens_per_s(self) -> float:
        return self.concurrent_turns * self.tokens_per_s_per_turn


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """How full a process or a shard may run."""

    core_share: float = 0.7  # of one core, for a worker, a Redis shard or a gateway process
    shard_gb: float = 25.0  # data a shard holds, so a resync or restart stays short
    memory_overhead: float = 1.5  # used_memory and fork headroom over the keys' own bytes
    replicas: int = 1  # per shard; each needs a core and the shard's memory


DEFAULT_LIMITS: Final = Limits()


class Plan(msgspec.Struct, frozen=True, kw_only=True):
    """What the demand needs."""

    tokens_per_s: float
    workers: int
    worker_load: float  # tokens/s each
    worker_cores: float  # CPU the workers use, in cores
    redis_cores: float  # CPU of the primaries, in cores
    shards: int  # primaries
    shards_for_cpu: int
    shards_for_memory: int
    clusters: int
    redis_gb: float  # the keys' bytes in the window, with the overhead
    redis_gb_per_hour_unretained: float  # growth with retention off
    gateway_frames_per_s: float
    gateway_cores: float
    gateway_processes: int
    partitions: int  # the fewest that let every worker and shard hold one
    cores: float  # workers + primaries and replicas + gateways, as processes provisioned


def monotone(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """(load, cost per token) sorted by load, each cost moved into [the previous point's CPU
    spread over this load, the previous cost]: cost never rises, CPU never falls with load."""
    out: list[tuple[float, float]] = []
    for load, cost in sorted(points):
        if out and load <= out[-1][0]:
            continue  # a second figure at the same load would make a vertical segment
        if out:
            prev_load, prev_cost = out[-1]
            cost = min(max(cost, prev_cost * prev_load / load), prev_cost)
        out.append((load, cost))
    return out


def cost_at(points: Sequence[tuple[float, float]], load: float) -> float:
    """Cost per token at `load`, from a monotone curve (see the module's docstring)."""
    if len(points) == 1 or load >= points[-1][0]:
        return points[-1][1]
    k = next((i for i in range(1, len(points)) if load < points[i][0]), len(points) - 1)
    (r0, c0), (r1, c1) = points[max(k - 1, 0)], points[max(k, 1)]
    slope = math.log(c1 / c0) / math.log(r1 / r0)
    return float(c0 * (load / r0) ** slope)


def capacity(points: Sequence[tuple[float, float]], budget_us_per_s: float) -> float:
    """The largest load whose CPU (load x cost) stays within `budget_us_per_s`."""
    top_load, top_cost = points[-1]
    if top_load * top_cost <= budget_us_per_s:
        return budget_us_per_s / top_cost
    low, high = 0.0, top_load
    for _ in range(100):  # load x cost rises with load: bisect
        mid = (low + high) / 2
        low, high = (mid, high) if mid * cost_at(points, mid) <= budget_us_per_s else (low, mid)
    return low


def curves(
    inputs: Inputs, cluster: bool = True
) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """The worker's and Redis's monotone cost curves: measured on a cluster if `cluster` and
    the inputs have them (a deployment of more than one shard is a cluster, whose client and
    replicas cost more per token than one Redis), else on one Redis."""
    costs = inputs.cluster_costs if cluster and inputs.cluster_costs else inputs.costs
    worker = monotone([(c.tokens_per_s, c.worker_us_per_token) for c in costs])
    redis = monotone([(c.tokens_per_s, c.redis_us_per_token) for c in costs])
    return worker, redis


def plan(demand: Demand, inputs: Inputs, limits: Limits = DEFAULT_LIMITS) -> Plan:
    """What `demand` needs, on machines like the one `inputs` were measured on, with Redis as
    a cluster (its costs, where the inputs have them)."""
    m = demand.tokens_per_s
    worker_curve, redis_curve = curves(inputs)
    budget = limits.core_share * 1e6
    most = capacity(worker_curve, budget)
    if most <= 0:
        raise ValueError(f"no load fits {limits.core_share} of a core: {worker_curve}")
    workers = max(1, math.ceil(m / most))
    load = m / workers
    worker_cores = m * cost_at(worker_curve, load) / 1e6
    redis_cores = m * cost_at(redis_curve, load) / 1e6
    keys_gb = m * inputs.total_bytes_per_token * demand.retain_s / 1e9
    redis_gb = keys_gb * limits.memory_overhead
    for_cpu = max(1, math.ceil(redis_cores / limits.core_share - 1e-9))
    for_memory = max(1, math.ceil(redis_gb / limits.shard_gb))
    shards = max(for_cpu, for_memory)
    frames = m * inputs.frames_per_token * demand.subscribers_per_session
    gateway_cores = frames * inputs.gateway_us_per_frame / 1e6
    gateways = max(1, math.ceil(gateway_cores / limits.core_share - 1e-9))
    return Plan(
        tokens_per_s=m,
        workers=workers,
        worker_load=load,
        worker_cores=worker_cores,
        redis_cores=redis_cores,
        shards=shards,
        shards_for_cpu=for_cpu,
        shards_for_memory=for_memory,
        clusters=math.ceil(shards / MAX_SHARDS_PER_CLUSTER),
        redis_gb=redis_gb,
        redis_gb_per_hour_unretained=m * inputs.total_bytes_per_token * 3600 / 1e9,
        gateway_frames_per_s=frames,
        gateway_cores=gateway_cores,
        gateway_processes=gateways,
        partitions=min(MAX_PARTITIONS, max(16, workers, shards)),
        cores=workers + shards * (1 + limits.replicas) + gateways,
    )

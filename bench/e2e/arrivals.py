"""The realistic workload of `bench.e2e --realistic`: N concurrent turns whose provider tokens
arrive in network reads, with the gaps and bursts of a streamed answer. Seeded: the same
arguments give the same schedule, so a later A/B replays exactly this load.

Units. A **provider token** is one unit of model output; the model below makes one per SSE
delta, as token-by-token streams do. A **read** is what one network read of the provider's
response delivers: the tokens generated since the previous read, all of one text part. Today's
producer publishes one `TextDelta` per token (the adapter makes one per SSE event), one publish
per read; that mapping is `one_delta_per_token`, the only place that says it. A producer that
coalesces a read's deltas into one event swaps it for another `DeltasOf` and publishes fewer
entries for the same tokens: costs per token stay comparable across the two.

The arrival process (every draw from one `random.Random(seed)`):
- Turns start as a Poisson process of rate N / (mean turn length), from `HORIZON_S` before the
  clock starts: at time 0 about N turns are in flight, each at a random point of its life (the
  steady state), not N turns all waiting for their first token. What the turns under way
  published before 0 is the prelude, published before the clock; reads due at or after
  `seconds` are dropped (those turns stay open).
- A turn opens with `turn-started` and `attempt-started` (two publishes, as `TurnPublisher`
  makes them), waits a time to first token, then streams its tokens in one text part. The last
  read also carries `text-end`, `finish-step` and the provider's terminal.
- Time to first token: lognormal, median 0.6 s, within 0.15-3 s. Tokens per turn: lognormal,
  median 200, within 16-1,200. Decode rate: log-uniform in 30-150 tokens/s, one per turn; each
  token comes a gamma-distributed gap after the previous one (mean 1/rate, shape 4).
- A read carries k tokens at the time the last of them was generated, k drawn from
  `READ_SIZES`: most reads carry one token, about one in ten carries four or more, the burst
  that follows a stall (a proxy's buffer, a TLS record, a busy client loop).

Where the numbers come from. The recorded transcripts under tests/fixtures/provider-streams keep
bytes, not arrival times, but three carry the provider's own timings: llama.cpp's `timings`
(openai-compatible/llama-cpp-gpt-oss-reasoning-timings-recorded-fantasy.sse: 57 tokens at
8.49 ms/token, 118 tokens/s), Bedrock's `invocationMetrics` for claude-haiku-4-5
(bedrock/anthropic-invoke-with-response-stream-recorded-fantasy.decoded.jsonl: first byte at
1,608 ms, 18 tokens by 1,743 ms) and Groq's usage for kimi-k2
(openai-compatible/groq-text-usage-recorded-fantasy.sse: 359 tokens in 0.877 s, 409 tokens/s,
special hardware and above the range kept here). Several SSE events per network read is the
common case for fast streams (anthropics/anthropic-sdk-typescript#1096) and under parallelism
(modelscope/evalscope#1102, TCP coalescing); relays deliver bursts after gaps of up to ~750 ms
(anomalyco/opencode#26688). No public recording with per-chunk arrival times was found, so
`READ_SIZES` is a stated model, not a fit.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Final, NamedTuple

import msgspec

from bench.common.workload import WORDS

HORIZON_S: Final = 60.0  # longer than any turn: by 0 the turns in flight are in steady state
PART: Final = "txt-0"
# (fewest, most tokens, weight): the tokens one network read delivers.
READ_SIZES: Final = ((1, 1, 0.60), (2, 2, 0.18), (3, 3, 0.08), (4, 6, 0.08), (7, 16, 0.05))
READ_SIZES_TAIL: Final = (17, 40, 0.01)
MEAN_SAMPLES: Final = 4000


class Model(msgspec.Struct, frozen=True, kw_only=True):
    """The arrival process's parameters (reported with the figures)."""

    turns: int  # turns in flight at once, on average
    seconds: float
    ttft_median_s: float = 0.6
    ttft_sigma: float = 0.5
    ttft_bounds_s: tuple[float, float] = (0.15, 3.0)
    tokens_median: float = 200.0
    tokens_sigma: float = 0.7
    tokens_bounds: tuple[int, int] = (16, 1200)
    rate_bounds: tuple[float, float] = (30.0, 150.0)  # tokens/s, log-uniform
    gap_shape: float = 4.0
    read_sizes: tuple[tuple[int, int, float], ...] = (*READ_SIZES, READ_SIZES_TAIL)


class Read(NamedTuple):
    """One network read: seconds after the clock started, and the tokens it delivers."""

    at_s: float
    tokens: tuple[str, ...]


class Shape(NamedTuple):
    """A turn drawn from the model, before it is placed in time."""

    ttft_s: float
    reads: tuple[Read, ...]  # times from the turn's start


DeltasOf = Callable[[Read], list[str]]


def one_delta_per_token(read: Read) -> list[str]:
    """The deltas today's producer publishes for a read: one per provider token."""
    return list(read.tokens)


def one_delta_per_read(read: Read) -> list[str]:
    """The deltas a producer with `coalesce_reads` publishes for a read: one for all of it."""
    return ["".join(read.tokens)]


def _bounded(value: float, bounds: tuple[float, float] | tuple[int, int]) -> float:
    return min(max(value, bounds[0]), bounds[1])


def _read_size(rng: random.Random, model: Model) -> int:
    low, high, _ = rng.choices(model.read_sizes, weights=[w for *_, w in model.read_sizes])[0]
    return rng.randint(low, high)


def draw_sizes(rng: random.Random, model: Model) -> tuple[float, int, float]:
    """A turn's time to first token (seconds), its tokens and its decode rate (tokens/s)."""
    ttft_s = rng.lognormvariate(math.log(model.ttft_median_s), model.ttft_sigma)
    drawn = rng.lognormvariate(math.log(model.tokens_median), model.tokens_sigma)
    rate = math.exp(rng.uniform(*(math.log(r) for r in model.rate_bounds)))
    return _bounded(ttft_s, model.ttft_bounds_s), round(_bounded(drawn, model.tokens_bounds)), rate


def draw_shape(rng: random.Random, model: Model) -> Shape:
    """A turn's time to first token and its reads, timed from the turn's start."""
    ttft_s, tokens, rate = draw_sizes(rng, model)
    times = [ttft_s]
    for _ in range(tokens - 1):
        times.append(times[-1] + rng.gammavariate(model.gap_shape, 1 / (model.gap_shape * rate)))
    reads, done = [], 0
    while done < tokens:
        k = min(tokens - done, _read_size(rng, model))
        words = tuple(" " + rng.choice(WORDS) for _ in range(k))
        reads.append(Read(times[done + k - 1], words))
        done += k
    return Shape(ttft_s, tuple(reads))


def mean_length_s(model: Model, seed: int) -> float:
    """The mean length of a turn, start to last token, estimated from the model's own draws
    (the gaps' mean is 1/rate, so their sum need not be drawn)."""
    rng = random.Random(f"mean-{seed}")
    draws = (draw_sizes(rng, model) for _ in range(MEAN_SAMPLES))
    return sum(ttft + (tokens - 1) / rate for ttft, tokens, rate in draws) / MEAN_SAMPLES

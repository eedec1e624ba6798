"""Every Redis key and stream name of terminus, and the partition of a session (DESIGN section 1).

Layout (`{p}` is the partition number inside a Redis Cluster hash tag, so one commit touches one
slot; `prefix` defaults to `terminus` and lets replay build projections beside the live ones):

    {prefix}:{p}:in                 inbound log (stream), source of truth for replay
    {prefix}:{p}:session:<sid>      session updates for frontends (stream, MAXLEN ~)
    {prefix}:{p}:commands           what producers act on: retry, compact, tools, end (stream)
    {prefix}:{p}:dead               dead letters (stream)
    {prefix}:{p}:turn:<tid>         turn snapshot (string, msgpack), kept once final until released
    {prefix}:{p}:tail:<tid>         text of the snapshot's open attempt (string, JSON lines)
    {prefix}:{p}:messages:<sid>     persisted messages of a session (hash message_id -> JSON)
    {prefix}:{p}:msgorder:<sid>     commit order of those messages (sorted set, score = entry ms)
    {prefix}:{p}:partials:<sid>     partial records of a session (hash turn_id -> JSON)
    {prefix}:{p}:turns              open turns of the partition (sorted set, score = stall deadline)
    {prefix}:{p}:archived           released turns whose snapshot is a tombstone (sorted set,
                                    score = the release entry's ms; service/retention/records.py)
    {prefix}:{p}:resting            sessions of released turns, which the archiver checks for
                                    idleness (sorted set, score = the latest such release's ms)
    {prefix}:{p}:transitions        every state change of the partition's turns (stream, MAXLEN ~;
                                    with retention, those of the entries the live log holds)
    {prefix}:{p}:<stream>-marks     where `transitions` / `commands` ended at each recent release
                                    (sorted set of their stream ids, score = the release's ms)
    {prefix}:{p}:traces-mark        where `terminus traces` resumes folding the log and up to where
                                    it exported (string, JSON; service/traces/marks.py)
    {prefix}:{p}:lease              the partition's lease: "<worker>:<epoch>" with a TTL
    {prefix}:{p}:epoch              the partition's last lease epoch (counter)
    {prefix}:{p}:metrics            the partition's domain counters (hash, docs/metrics.md)
    {prefix}:workers                live workers (sorted set, score = heartbeat deadline in ms)
    {prefix}:control                rebalance nudges (pub/sub channel)
    {prefix}:metrics:worker:<id>    one worker process's own metrics (hash with a TTL)
    {prefix}:shape                  the deployment's shape: partitions, prefix, contract version,
                                    who recorded it (hash, written once; service/shape.py)

A sink named <name> (service/sinks/) keeps its own namespace, `sink_prefix`, under which the
same `Keys` names serve it: `{sink}:{p}:lease` and `{sink}:{p}:epoch` (its partition leases,
apart from the workers'), `{sink}:{p}:dead` (rows its database refused), `{sink}:{p}:metrics`
(its counters) and `{sink}:workers` (its live processes), where {sink} is
`{prefix}:sink:<name>`; `{prefix}:sinks` names every sink (a hash: name -> its namespace), for
`GET /metrics`.

The partition is CRC-32 (IEEE, as zlib computes it) of the UTF-8 session id, modulo P. Never
Python's `hash()`, which is salted per process.
"""

from __future__ import annotations

import zlib
from typing import Final

DEFAULT_PREFIX: Final = "terminus"
FIELD: Final = b"e"  # the one field of every stream entry: an encoded event, frame or record
START: Final = "0-0"  # the id before every entry of a stream: read from here to read it all
GROUP: Final = "terminus-workers"


def partition_of(session_id: str, partitions: int) -> int:
    """The partition a session belongs to: stable across processes, hosts and versions."""
    return zlib.crc32(session_id.encode()) % partitions


class Keys:
    """Key names of one partition under one prefix."""

    # The partition's own keys, named once: a pump asks for some of them for every owner and
    # round.
    __slots__ = (
        "archived",
        "commands",
        "dead",
        "epoch",
        "inbound",
        "lease",
        "metrics",
        "open_turns",
        "partition",
        "prefix",
        "resting",
        "root",
        "traces_mark",
        "transitions",
    )

    def __init__(self, partition: int, prefix: str = DEFAULT_PREFIX) -> None:
        self.partition = partition
        self.prefix = prefix
        self.root = root = f"{prefix}:{{{partition}}}"
        self.inbound = f"{root}:in"
        self.commands = f"{root}:commands"
        self.dead = f"{root}:dead"
        self.open_turns = f"{root}:turns"
        self.archived = f"{root}:archived"
        self.resting = f"{root}:resting"
        self.transitions = f"{root}:transitions"
        self.traces_mark = f"{root}:traces-mark"
        self.lease = f"{root}:lease"
        self.epoch = f"{root}:epoch"
        self.metrics = f"{root}:metrics"

    def marks(self, stream: str) -> str:
        """The release marks of `stream`, one of this partition's `transitions` or `commands`."""
        return f"{stream}-marks"

    def session(self, session_id: str) -> str:
        return f"{self.root}:session:{session_id}"

    def turn(self, turn_id: str) -> str:
        return f"{self.root}:turn:{turn_id}"

    def tail(self, turn_id: str) -> str:
        return f"{self.root}:tail:{turn_id}"

    def messages(self, session_id: str) -> str:
        return f"{self.root}:messages:{session_id}"

    def message_order(self, session_id: str) -> str:
        return f"{self.root}:msgorder:{session_id}"

    def partials(self, session_id: str) -> str:
        return f"{self.root}:partials:{session_id}"


def workers_key(prefix: str = DEFAULT_PREFIX) -> str:
    """The pool's membership set; it spans partitions, so it is never part of a commit."""
    return f"{prefix}:workers"


def worker_metrics_key(worker_id: str, prefix: str = DEFAULT_PREFIX) -> str:
    """A worker process's own metrics (commit latencies, lease changes, lanes); outside any
    partition's slot."""
    return f"{prefix}:metrics:worker:{worker_id}"


def control_channel(prefix: str = DEFAULT_PREFIX) -> str:
    """Pub/sub channel on which workers nudge each other to rebalance at once."""
    return f"{prefix}:control"


def shape_key(prefix: str = DEFAULT_PREFIX) -> str:
    """The deployment's recorded shape. No hash tag: it is read and written alone, never in a
    commit, so it needs no partition's slot, and lives in the one its whole name hashes to
    rather than adding to partition 0's (the prefix holds no braces: service/settings.py)."""
    return f"{prefix}:shape"


def sink_prefix(name: str, prefix: str = DEFAULT_PREFIX) -> str:
    """The namespace of the sink `name`: its leases, members, dead letters and counters."""
    return f"{prefix}:sink:{name}"


def sinks_key(prefix: str = DEFAULT_PREFIX) -> str:
    """The sinks that ever ran (a hash: name -> namespace), whose counters `GET /metrics` shows."""
    return f"{prefix}:sinks"


def keys_for_session(session_id: str, partitions: int, prefix: str = DEFAULT_PREFIX) -> Keys:
    return Keys(partition_of(session_id, partitions), prefix)

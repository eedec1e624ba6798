"""The floor: the least any consumer of the contract does per inbound entry, measured by the
same harness as terminus, so that a cost of terminus at light load can be set beside what no
implementation of the contract could avoid on the same machine.

Per round it makes one pipelined request: the frames of what the last round read (one XADD of
the entry's own bytes to its session stream per entry, the contract's frame per delta), their
XACKs, and one XREADGROUP over every partition's inbound log for what came since. It lingers
between rounds at light load as terminus's pump does (`TERMINUS_LINGER_MS`, by default the
linger terminus's default latency budget gives a round of about a millisecond), and blocks
while nothing comes.

It leaves out everything else terminus does: no fold, no lease or fence, no resend check, no
all-or-nothing checks, no snapshot, no counters, no dead letters. So it is no implementation a
user could run, only a floor: whatever it costs at a rate, terminus cannot cost less there.

Its settings are the worker's: REDIS_URL, TERMINUS_PREFIX, TERMINUS_PARTITIONS,
TERMINUS_BATCH_SIZE, TERMINUS_LINGER_MS; BENCH_FLOOR_LINGER_MS sets its linger alone.
"""

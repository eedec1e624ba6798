--[[
Commit one batch of a partition: every write and the XACK of its entries, or nothing at all;
then, if asked, read the next batch in the same call.

Race closed: a worker whose lease expired, and was then taken by another worker with a higher
epoch, must never write (DESIGN invariant 7). Checking the lease inside the same script as the
writes leaves no gap in which the lease could change hands. The read that follows is fenced by
the same check (see read.lua).

KEYS[1]      the partition's lease
KEYS[2]      the partition's inbound stream
KEYS[3..]    every key the ops write, each listed once (all carry the partition's hash tag)

ARGV[1]      the lease value the caller holds, "<worker_id>:<epoch>"
ARGV[2]      the consumer group
ARGV[3]      the consumer (the caller's worker id)
ARGV[4]      how many entries to read after the commit (0: none)
ARGV[5]      the batch, one MessagePack array {acks, ops} ('' for none): acks are the inbound
             entry ids to XACK, each op an array of an opcode, an index k into KEYS, operands:
  {F, k, maxlen, f1, v1, ..}   XADD KEYS[k] MAXLEN ~ maxlen * f1 v1 ..; its id is returned
  {X, k, maxlen, f1, v1, ..}   the same, its id not returned; maxlen '0' means uncapped
  {S, k, value}                SET KEYS[k] value
  {A, k, value}                APPEND value to KEYS[k]
  {D, k}                       DEL KEYS[k]
  {L, k, value}                DEL KEYS[k], a stream, if its last entry's field e is value
  {H, k, field, value}         HSET KEYS[k] field value
  {E, k, field}                HDEL KEYS[k] field
  {Z, k, score, member}        ZADD KEYS[k] score member
  {N, k, score, member}        ZADD KEYS[k] NX score member (keeps the first score)
  {R, k, member}               ZREM KEYS[k] member
  {I, k, field, n}             HINCRBY KEYS[k] field n (n an integer of at most 18 digits)
  {K, k, score, m}             ZADD KEYS[m] score <id of the last entry of stream KEYS[k]>
                               (a mark; nothing if the stream is empty)
  {T, k, score, m}             XTRIM KEYS[k] MINID just past its newest mark in KEYS[m] scored
                               below score (exact), and drop that mark and the older ones
ARGV[6]      (optional) the id of the last entry the caller read in its current epoch: if the
             stream still ends there, the read after the commit answers nothing new at once
One array instead of thousands of ARGV values: the client packs it in C (msgspec) and the
script unpacks it in C (cmsgpack); numbers travel as strings, byte strings as msgpack str.

Returns 0 when the lease does not hold ARGV[1] (nothing written, nothing acked, nothing read);
-1 when the batch was already committed (none of its entries is still pending for ARGV[3]: a
re-sent commit; nothing written, nothing read); otherwise {ids of the F ops in order, then the read's ids, payloads and tail (next_entries)}.
Redis does not roll a script back when a command fails halfway, so every op and key type is
checked before the first write, and so is every field an I op increments: HINCRBY fails on a
field that holds no integer. A key takes either H or I ops, never both, so no H of the same
batch can put a non-integer where an I adds.
]]
--!include next_entries
--!include commit_body
return commit_call(KEYS, ARGV)

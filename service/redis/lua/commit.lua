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
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end

local SIZE = {S = 3, A = 3, D = 2, L = 3, H = 4, E = 3, Z = 4, N = 4, R = 3, I = 4, K = 4, T = 4}
local WANTS = {
  F = 'stream', X = 'stream', L = 'stream', S = 'string', A = 'string',
  H = 'hash', E = 'hash', Z = 'zset', N = 'zset', R = 'zset', I = 'counters',
  K = 'stream', T = 'stream',
}
local MARKED = {K = true, T = true}  -- ops whose 4th element is the index of a marks key
local INTEGER = '^%-?%d+$'

local function type_problem(key, wanted)
  local found = redis.call('TYPE', key)['ok']
  local stored = wanted == 'counters' and 'hash' or wanted
  if found ~= 'none' and found ~= stored then
    return 'WRONGTYPE ' .. key .. ' holds a ' .. found .. ', not a ' .. stored
  end
end

-- An I op's increment must be an integer HINCRBY takes, and its field empty or an integer.
local function counter_problem(n, key, op)
  local field, by = op[3], op[4]
  if type(field) ~= 'string' or type(by) ~= 'string' or not by:match(INTEGER) or #by > 18 then
    return 'malformed op ' .. n
  end
  local held = redis.call('HGET', key, field)
  if held and not held:match(INTEGER) then
    return 'field ' .. field .. ' of ' .. key .. ' holds no integer'
  end
end

local function written_key(k)
  k = tonumber(k)
  return k and k >= 3 and KEYS[k]
end

-- Records that `key` must be a `wanted`; returns why it cannot be, or nil.
local function want(wants, key, wanted)
  if wants[key] and wants[key] ~= wanted then
    return 'ops want ' .. key .. ' to be both a ' .. wants[key] .. ' and a ' .. wanted
  end
  if not wants[key] then
    wants[key] = wanted
    return type_problem(key, wanted)
  end
end

-- Walks the ops without writing; returns why the batch cannot be written, or nil. An op may
-- name only a written key (KEYS[3..]: never the lease or the inbound stream), and every op on a
-- key must want the type the key has, or would get from the first op that creates it.
local function problem(ops)
  local wants = {}
  local bad = type_problem(KEYS[2], 'stream')
  for n, op in ipairs(ops) do
    if bad then
      return bad
    end
    local code = op[1]
    local key, wanted = written_key(op[2]), WANTS[code]
    local appends = code == 'F' or code == 'X'
    local fits = SIZE[code] == #op or (appends and #op >= 5 and #op % 2 == 1)
    local marks = MARKED[code] and written_key(op[4])
    local unmarked = MARKED[code] and not (marks and tostring(op[3]):match(INTEGER))
    if not key or not wanted and code ~= 'D' or not fits or unmarked then
      return 'malformed op ' .. n
    end
    if wanted then
      bad = want(wants, key, wanted)
    end
    if marks and not bad then
      bad = want(wants, marks, 'zset')
    end
    if code == 'I' and not bad then
      bad = counter_problem(n, key, op)
    end
  end
  return bad
end

local function stream_id(id)
  local ms, seq = string.match(id, '^(%d+)%-(%d+)$')
  return ms, tonumber(ms), tonumber(seq)
end

-- XTRIM past the newest mark scored below `score`. Marks grow with the stream (a release marks
-- where it ends), so of marks sharing a score (two releases in one ms) the largest id is newest.
local function trim_to_mark(key, score, marks)
  local top = redis.call('ZREVRANGEBYSCORE', marks, '(' .. score, '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #top == 0 then
    return
  end
  local newest, newest_ms, newest_seq = nil, -1, -1
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', marks, top[2], top[2])) do
    local digits, ms, seq = stream_id(id)
    if ms > newest_ms or (ms == newest_ms and seq > newest_seq) then
      newest, newest_ms, newest_seq = digits, ms, seq
    end
  end
  redis.call('XTRIM', key, 'MINID', newest .. '-' .. string.format('%d', newest_seq + 1))
  redis.call('ZREMRANGEBYSCORE', marks, '-inf', top[2])
end

local function apply(op, ids)
  local code, key = op[1], KEYS[tonumber(op[2])]
  if code == 'F' or code == 'X' then
    local id
    if op[3] == '0' then
      id = redis.call('XADD', key, '*', unpack(op, 4))
    else
      id = redis.call('XADD', key, 'MAXLEN', '~', op[3], '*', unpack(op, 4))
    end
    if code == 'F' then
      ids[#ids + 1] = id
    end
  elseif code == 'S' then
    redis.call('SET', key, op[3])
  elseif code == 'A' then
    redis.call('APPEND', key, op[3])
  elseif code == 'D' then
    redis.call('DEL', key)
  elseif code == 'L' then
    local last = redis.call('XREVRANGE', key, '+', '-', 'COUNT', 1)[1]
    local fields = last and last[2] or {}
    for n = 1, #fields, 2 do
      if fields[n] == 'e' and fields[n + 1] == op[3] then
        redis.call('DEL', key)
      end
    end
  elseif code == 'H' then
    redis.call('HSET', key, op[3], op[4])
  elseif code == 'E' then
    redis.call('HDEL', key, op[3])
  elseif code == 'Z' then
    redis.call('ZADD', key, op[3], op[4])
  elseif code == 'N' then
    redis.call('ZADD', key, 'NX', op[3], op[4])
  elseif code == 'I' then
    redis.call('HINCRBY', key, op[3], op[4])
  elseif code == 'K' then
    local last = redis.call('XREVRANGE', key, '+', '-', 'COUNT', 1)[1]
    if last then
      redis.call('ZADD', KEYS[tonumber(op[4])], op[3], last[1])
    end
  elseif code == 'T' then
    trim_to_mark(key, op[3], KEYS[tonumber(op[4])])
  else
    redis.call('ZREM', key, op[3])
  end
end

local ids = {}
if ARGV[5] ~= '' then
  local batch = cmsgpack.unpack(ARGV[5])
  local acks, ops = batch[1], batch[2]
  -- Race closed: a client library's own retry re-sending a commit this script already applied
  -- (redis-py's cluster client re-sends every command still without a reply after one node of a
  -- pipeline fails). The same epoch passes the lease check, so the batch's entries decide: once
  -- applied, none of them is pending for this consumer any more. Write nothing, answer -1.
  if #acks > 0 and ARGV[3] ~= '' then
    local pending = redis.call('XPENDING', KEYS[2], ARGV[2], acks[1], acks[#acks], 1, ARGV[3])
    if #pending == 0 then
      return -1
    end
  end
  local bad = problem(ops)
  if bad then
    return redis.error_reply('terminus commit: ' .. bad)
  end
  for _, op in ipairs(ops) do
    apply(op, ids)
  end
  -- XACK in slices: Lua's unpack cannot spread more than a few thousand values.
  for first = 1, #acks, 1000 do
    redis.call('XACK', KEYS[2], ARGV[2], unpack(acks, first, math.min(first + 999, #acks)))
  end
end
if tonumber(ARGV[4]) > 0 then
  local read = next_entries(ARGV[4])
  return {ids, read[1], read[2], read[3]}
end
return {ids, {}, {}, ''}

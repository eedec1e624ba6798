--[[
Commit one batch of a partition: every write and the XACK of its entries, or nothing at all.

Race closed: a worker whose lease expired, and was then taken by another worker with a higher
epoch, must never write (DESIGN invariant 7). Checking the lease inside the same script as the
writes leaves no gap in which the lease could change hands.

KEYS[1]      the partition's lease
KEYS[2]      the partition's inbound stream
KEYS[3..]    every key the ops write, each listed once (all carry the partition's hash tag)

ARGV[1]      the lease value the caller holds, "<worker_id>:<epoch>"
ARGV[2]      the consumer group
ARGV[3]      n, the number of inbound entry ids to XACK; ARGV[4 .. 3+n] are those ids
ARGV[4+n ..] ops, each an opcode, an index k into KEYS, then its operands:
  F k maxlen m f1 v1 .. fm vm   XADD KEYS[k] MAXLEN ~ maxlen * f1 v1 ..; its id is returned
  X k maxlen m f1 v1 .. fm vm   the same, its id not returned; maxlen 0 means uncapped
  S k value                     SET KEYS[k] value
  D k                           DEL KEYS[k]
  H k field value               HSET KEYS[k] field value
  Z k score member              ZADD KEYS[k] score member
  N k score member              ZADD KEYS[k] NX score member (keeps the first score)
  R k member                    ZREM KEYS[k] member

Returns 0 when the lease does not hold ARGV[1] (nothing written, nothing acked); otherwise the
ids of the F ops in order. Redis does not roll a script back when a command fails halfway, so
every op and key type is checked before the first write.
]]

if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end

local ARITY = {S = 1, D = 0, H = 2, Z = 2, N = 2, R = 1}
local WANTS = {
  F = 'stream', X = 'stream', S = 'string', H = 'hash', Z = 'zset', N = 'zset', R = 'zset',
}
local acks = tonumber(ARGV[3])
local first_op = 4 + acks

local function op_size(i)
  local op = ARGV[i]
  if op == 'F' or op == 'X' then
    return 4 + 2 * tonumber(ARGV[i + 3])
  end
  return ARITY[op] and 2 + ARITY[op]
end

local function type_problem(key, wanted)
  local found = redis.call('TYPE', key)['ok']
  if found ~= 'none' and found ~= wanted then
    return 'WRONGTYPE ' .. key .. ' holds a ' .. found .. ', not a ' .. wanted
  end
end

-- Walks the ops without writing; returns why the batch cannot be written, or nil.
local function problem()
  local checked = {[KEYS[2]] = true}
  local bad = type_problem(KEYS[2], 'stream')
  local i = first_op
  while not bad and i <= #ARGV do
    local key, size = KEYS[tonumber(ARGV[i + 1])], op_size(i)
    if not key or not size then
      return 'malformed op at ARGV[' .. i .. ']'
    end
    local wanted = WANTS[ARGV[i]]
    if wanted and not checked[key] then
      checked[key] = true
      bad = type_problem(key, wanted)
    end
    i = i + size
  end
  if not bad and i ~= #ARGV + 1 then
    return 'truncated op list'
  end
  return bad
end

local function xadd(i, ids)
  local args = {'XADD', KEYS[tonumber(ARGV[i + 1])]}
  if ARGV[i + 2] ~= '0' then
    args[#args + 1] = 'MAXLEN'
    args[#args + 1] = '~'
    args[#args + 1] = ARGV[i + 2]
  end
  args[#args + 1] = '*'
  for j = i + 4, i + 3 + 2 * tonumber(ARGV[i + 3]) do
    args[#args + 1] = ARGV[j]
  end
  local id = redis.call(unpack(args))
  if ARGV[i] == 'F' then
    ids[#ids + 1] = id
  end
end

local function apply(i, ids)
  local op, key = ARGV[i], KEYS[tonumber(ARGV[i + 1])]
  if op == 'F' or op == 'X' then
    xadd(i, ids)
  elseif op == 'S' then
    redis.call('SET', key, ARGV[i + 2])
  elseif op == 'D' then
    redis.call('DEL', key)
  elseif op == 'H' then
    redis.call('HSET', key, ARGV[i + 2], ARGV[i + 3])
  elseif op == 'Z' then
    redis.call('ZADD', key, ARGV[i + 2], ARGV[i + 3])
  elseif op == 'N' then
    redis.call('ZADD', key, 'NX', ARGV[i + 2], ARGV[i + 3])
  else
    redis.call('ZREM', key, ARGV[i + 2])
  end
end

local bad = problem()
if bad then
  return redis.error_reply('terminus commit: ' .. bad)
end
local ids = {}
local i = first_op
while i <= #ARGV do
  apply(i, ids)
  i = i + op_size(i)
end
-- XACK in slices: Lua's unpack cannot spread more than a few thousand values.
for first = 4, 3 + acks, 1000 do
  redis.call('XACK', KEYS[2], ARGV[2], unpack(ARGV, first, math.min(first + 999, 3 + acks)))
end
return ids

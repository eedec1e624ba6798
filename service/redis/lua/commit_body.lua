-- Included by commit.lua and round.lua (see service/redis/scripts.py): commit.lua's work, on the
-- KEYS and ARGV it is given rather than the script's own, so that round.lua can run it for each
-- owner of a round. commit.lua's header documents both and the reply.
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

-- An I op's increment must be an integer HINCRBY takes; its field is noted in `counted` (key ->
-- its fields), whose values `uncountable` checks once all ops are walked.
local function counter_problem(n, key, op, counted)
  local field, by = op[3], op[4]
  if type(field) ~= 'string' or type(by) ~= 'string' or not by:match(INTEGER) or #by > 18 then
    return 'malformed op ' .. n
  end
  local fields = counted[key]
  if not fields then
    fields = {}
    counted[key] = fields
  end
  fields[#fields + 1] = field
end

-- Every field an I op increments must be empty or hold an integer: one HMGET per counters key,
-- where a HGET per op cost a call each (at light load a commit's calls are most of its cost).
local function uncountable(counted)
  for key, fields in pairs(counted) do
    for first = 1, #fields, 1000 do  -- Lua's unpack cannot spread more than a few thousand
      local last = math.min(first + 999, #fields)
      local held = redis.call('HMGET', key, unpack(fields, first, last))
      for i = 1, last - first + 1 do
        if held[i] and not held[i]:match(INTEGER) then
          return 'field ' .. fields[first + i - 1] .. ' of ' .. key .. ' holds no integer'
        end
      end
    end
  end
end

local function written_key(keys, k)
  k = tonumber(k)
  return k and k >= 3 and keys[k]
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
-- key must want the type the key has, or would get from the first op that creates it. The
-- inbound stream's type is checked too, unless `inbound_known`: a command on it already ran
-- without error (XPENDING fails on a key that is no stream).
local function problem(keys, ops, inbound_known)
  local wants, counted = {}, {}
  local bad = nil
  if not inbound_known then
    bad = type_problem(keys[2], 'stream')
  end
  for n, op in ipairs(ops) do
    if bad then
      return bad
    end
    local code = op[1]
    local key, wanted = written_key(keys, op[2]), WANTS[code]
    local appends = code == 'F' or code == 'X'
    local fits = SIZE[code] == #op or (appends and #op >= 5 and #op % 2 == 1)
    local marks = MARKED[code] and written_key(keys, op[4])
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
      bad = counter_problem(n, key, op, counted)
    end
  end
  return bad or uncountable(counted)
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

local function apply(keys, op, ids)
  local code, key = op[1], keys[tonumber(op[2])]
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
      redis.call('ZADD', keys[tonumber(op[4])], op[3], last[1])
    end
  elseif code == 'T' then
    trim_to_mark(key, op[3], keys[tonumber(op[4])])
  else
    redis.call('ZREM', key, op[3])
  end
end

local function commit_call(KEYS, ARGV)
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return 0
  end
  local ids = {}
  if ARGV[5] ~= '' then
    local batch = cmsgpack.unpack(ARGV[5])
    local acks, ops = batch[1], batch[2]
    -- Race closed: a client library's own retry re-sending a commit this script already applied
    -- (redis-py's cluster client re-sends every command still without a reply after one node of a
    -- pipeline fails). The same epoch passes the lease check, so the batch's entries decide: once
    -- applied, none of them is pending for this consumer any more. Write nothing, answer -1.
    local resend_checked = #acks > 0 and ARGV[3] ~= ''
    if resend_checked then
      local pending = redis.call('XPENDING', KEYS[2], ARGV[2], acks[1], acks[#acks], 1, ARGV[3])
      if #pending == 0 then
        return -1
      end
    end
    local bad = problem(KEYS, ops, resend_checked)
    if bad then
      return redis.error_reply('terminus commit: ' .. bad)
    end
    for _, op in ipairs(ops) do
      apply(KEYS, op, ids)
    end
    -- XACK in slices: Lua's unpack cannot spread more than a few thousand values.
    for first = 1, #acks, 1000 do
      redis.call('XACK', KEYS[2], ARGV[2], unpack(acks, first, math.min(first + 999, #acks)))
    end
  end
  if tonumber(ARGV[4]) > 0 then
    local read = unchanged(KEYS[2], ARGV[6]) or next_entries(KEYS[2], ARGV[2], ARGV[3], ARGV[4])
    return {ids, read[1], read[2], read[3]}
  end
  return {ids, {}, {}, ''}
end

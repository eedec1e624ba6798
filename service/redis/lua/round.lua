--[[
A pump's round on one Redis: every busy owner's read (read.lua) or commit-and-read (commit.lua),
each on its own KEYS and ARGV, each answered as that script answers; then the probe of every idle
owner, which reads only the partitions whose logs grew.

Why one call: at light load a round carries a few entries for each of many partitions, and
each EVALSHA of its own cost the worker packing and parsing and Redis a script call, per
partition and round (docs/performance.md, "Rounds at light load"). Owners stay independent: each
call is fenced by its own lease, and one that fails (a commit's WRONGTYPE, a bug) answers an
error in its place while the others' answers stand, as in a pipeline of separate calls. Only
for one Redis: on a cluster each partition is its own slot, and a script's keys must share one.

Why probes: most idle owners of a round have nothing to read. One XREAD over all their logs
tells which grew (in C, without a lease GET or an XRANGE for each); only those are read, each
fenced by its lease as read.lua fences it (docs/performance.md, "Rounds that cost what they
carry").

KEYS       the calls' KEYS, one call after the other; then each probe's lease and inbound stream
ARGV[1]    the calls, one MessagePack array: each {'read' or 'commit', how many KEYS, its ARGV}
           (packed in C by the client and unpacked in C here: a round of sixteen owners has a
           few hundred values, which the client would otherwise encode one by one)
ARGV[2]    (optional) the probes, one MessagePack array {group, count, fences}: fences holds
           {lease value, consumer, last id seen} of each probe in turn; an owner probed has read
           its log up to that id in its lease's epoch
Returns {replies, hits}: one reply per call, in order, read.lua's or commit.lua's or an error in
its place; and, for each probe whose log grew, its number (1-based) then read.lua's reply (0 if
the lease is not its value) or an error in its place.
]]
--!include next_entries
--!include read_body
--!include commit_body
local RUN = {read = read_call, commit = commit_call}

local function slice(list, first, count)
  local part = {}
  for n = 1, count do
    part[n] = list[first + n - 1]
  end
  return part
end

-- redis.call raises its error as {err = ...}; anything else raised is a message
local function as_error(raised)
  return type(raised) == 'table' and raised.err and raised or {err = tostring(raised)}
end

local replies = {}
local key = 1
for n, call in ipairs(cmsgpack.unpack(ARGV[1])) do
  local run, nkeys, args = RUN[call[1]], tonumber(call[2]), call[3]
  local keys = slice(KEYS, key, nkeys)
  key = key + nkeys
  local ok, reply = pcall(run, keys, args)
  if not ok then
    reply = as_error(reply)
  end
  replies[n] = reply
end

-- Spread over XREADs of at most this many logs: Lua's unpack cannot spread more than a few
-- thousand values.
local PROBES_PER_XREAD = 1000

-- Which probes' logs hold an entry after their last id seen: a set of probe numbers. One that
-- cannot be told (its key is not a stream) is in `failed` with its error.
local function grown(first_key, fences, from, to, found, failed)
  local args = {'COUNT', 1, 'STREAMS'}
  local count = to - from + 1
  local number = {}
  for p = from, to do
    local stream = KEYS[first_key + 2 * (p - 1) + 1]
    args[3 + p - from + 1] = stream
    args[3 + count + p - from + 1] = fences[3 * p]
    number[stream] = p
  end
  local ok, reply = pcall(redis.call, 'XREAD', unpack(args))
  if ok then
    for _, stream in ipairs(reply or {}) do
      found[number[stream[1]]] = true
    end
    return
  end
  -- One log of the lot failed the XREAD (WRONGTYPE): tell each on its own.
  for p = from, to do
    local ok_one, same = pcall(unchanged, KEYS[first_key + 2 * (p - 1) + 1], fences[3 * p])
    if not ok_one then
      failed[p] = as_error(same)
    elseif not same then
      found[p] = true
    end
  end
end

local hits = {}
if ARGV[2] then
  local probes = cmsgpack.unpack(ARGV[2])
  local group, count, fences = probes[1], probes[2], probes[3]
  local total = #fences / 3
  local found, failed = {}, {}
  for from = 1, total, PROBES_PER_XREAD do
    grown(key, fences, from, math.min(from + PROBES_PER_XREAD - 1, total), found, failed)
  end
  for p = 1, total do
    local lease_key, stream = KEYS[key + 2 * (p - 1)], KEYS[key + 2 * (p - 1) + 1]
    local reply = failed[p]
    if found[p] then
      local ok, read = pcall(function()
        if redis.call('GET', lease_key) ~= fences[3 * p - 2] then
          return 0
        end
        return next_entries(stream, group, fences[3 * p - 1], count)
      end)
      reply = read
      if not ok then
        reply = as_error(read)
      end
    end
    if reply then
      hits[#hits + 1] = p
      hits[#hits + 1] = reply
    end
  end
end
return {replies, hits}

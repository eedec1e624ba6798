--[[
A pump's round on one Redis: every owner's read (read.lua) or commit-and-read (commit.lua) in
one script call, each on its own KEYS and ARGV, each answered as that script answers.

Why one call: at light load a round carries a few entries for each of many partitions, and
each EVALSHA of its own cost the worker packing and parsing and Redis a script call, per
partition and round (docs/performance.md, "Rounds at light load"). Owners stay independent: each
call is fenced by its own lease, and one that fails (a commit's WRONGTYPE, a bug) answers an
error in its place while the others' answers stand, as in a pipeline of separate calls. Only
for one Redis: on a cluster each partition is its own slot, and a script's keys must share one.

KEYS       the calls' KEYS, one call after the other
ARGV[1]    the calls, one MessagePack array: each {'read' or 'commit', how many KEYS, its ARGV}
           (packed in C by the client and unpacked in C here: a round of sixteen owners has a
           few hundred values, which the client would otherwise encode one by one)
Returns one reply per call, in order: read.lua's or commit.lua's, or an error in its place.
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

local replies = {}
local key = 1
for n, call in ipairs(cmsgpack.unpack(ARGV[1])) do
  local run, nkeys, args = RUN[call[1]], tonumber(call[2]), call[3]
  local keys = slice(KEYS, key, nkeys)
  key = key + nkeys
  local ok, reply = pcall(run, keys, args)
  if not ok then
    -- redis.call raises its error as {err = ...}; anything else raised is a message
    reply = type(reply) == 'table' and reply.err and reply or {err = tostring(reply)}
  end
  replies[n] = reply
end
return replies

--[[
Trim a partition's inbound log up to the end of its archive, on behalf of the partition's owner.

Races closed: a worker that lost its lease trimming behind the new owner's back (the check and
the XTRIM are one script); and a trim past an entry the group has not finished with: an entry
still pending (read, not committed: a crash would redeliver it from the log) or not delivered
yet (never folded). Both are checked here, in the same script as the trim, because a read can
deliver new entries between a check made by the client and the trim.

KEYS[1] lease, KEYS[2] inbound stream
ARGV[1] lease value, ARGV[2] the consumer group, ARGV[3] the last archived entry id,
ARGV[4] the MINID to trim to (the smallest id after ARGV[3])
Returns how many entries were trimmed, or -1 lease lost, -2 an entry at or before ARGV[3] is
pending, -3 the group has not delivered ARGV[3] yet.
]]
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return -1
end

local function parse(id)
  local ms, seq = string.match(id, '^(%d+)%-(%d+)$')
  return tonumber(ms), tonumber(seq)
end

-- whether stream id a orders before stream id b
local function before(a, b)
  local a_ms, a_seq = parse(a)
  local b_ms, b_seq = parse(b)
  return a_ms < b_ms or (a_ms == b_ms and a_seq < b_seq)
end

local pending = redis.call('XPENDING', KEYS[2], ARGV[2])
if pending[1] > 0 and not before(ARGV[3], pending[2]) then
  return -2
end

local delivered = nil
for _, group in ipairs(redis.call('XINFO', 'GROUPS', KEYS[2])) do
  local fields = {}
  for n = 1, #group, 2 do
    fields[group[n]] = group[n + 1]
  end
  if fields['name'] == ARGV[2] then
    delivered = fields['last-delivered-id']
  end
end
if not delivered or before(delivered, ARGV[3]) then
  return -3
end
return redis.call('XTRIM', KEYS[2], 'MINID', ARGV[4])

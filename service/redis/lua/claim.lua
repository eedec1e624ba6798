--[[
Take over the pending entries of a partition: claim a page of them for the new owner and tell
how often each was delivered, so poison entries can be dead-lettered.

Race closed: a worker that lost its lease claiming entries the owner is about to apply; the
lease check and the claim are one step.

KEYS[1] lease, KEYS[2] inbound stream
ARGV[1] lease value, ARGV[2] group, ARGV[3] consumer, ARGV[4] start id, ARGV[5] count
Returns 0 if the lease is not ARGV[1]; else {next start id, entries, delivery counts}, where
entries are {id, fields} ({id, false} for an entry deleted from the stream while pending) and
counts are {id, times delivered} as XPENDING reports them after this claim.
]]
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local claimed = redis.call('XAUTOCLAIM', KEYS[2], ARGV[2], ARGV[3], 0, ARGV[4], 'COUNT', ARGV[5])
local entries, counts = claimed[2], {}
if #entries > 0 then
  local first, last = entries[1][1], entries[#entries][1]
  for _, row in ipairs(redis.call('XPENDING', KEYS[2], ARGV[2], first, last, #entries, ARGV[3])) do
    counts[#counts + 1] = {row[1], row[4]}
  end
end
-- Redis 7 reports entries deleted while pending in claimed[3] and drops them from the pending
-- list itself; Redis 6.2 returns them in place as nil, and they are acked by the caller.
return {claimed[1], entries, counts}

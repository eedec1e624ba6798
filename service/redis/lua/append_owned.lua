--[[
Append an event to a partition's inbound log on behalf of its owner (the stall timer).

Race closed: a worker that lost its lease, acting on a stale view of a turn, appending an
`attempt-stalled` that the new owner's view would never have produced.

KEYS[1] lease, KEYS[2] inbound stream; ARGV[1] lease value, ARGV[2] field, ARGV[3] value
Returns the new entry id, or 0 if the lease is not ARGV[1].
]]
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
return redis.call('XADD', KEYS[2], '*', ARGV[2], ARGV[3])

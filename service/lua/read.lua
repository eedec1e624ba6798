--[[
Read the next batch of a partition's inbound log for its owner, or nothing for anyone else.

Race closed: a plain XREADGROUP (blocking or not) by a worker whose lease has expired moves
entries into that worker's pending list; the new owner, already past its takeover drain, would
never see them, and later events of the same turns would be applied before them. Checking the
lease in the same script as the read fences reads as commits are fenced. Scripts cannot block,
so the caller waits with a plain XREAD (which changes nothing) and then calls this again.

KEYS[1] lease, KEYS[2] inbound stream
ARGV[1] lease value "<worker>:<epoch>", ARGV[2] group, ARGV[3] consumer, ARGV[4] count
Returns 0 if the lease is not ARGV[1]; else {entries, tail}: the entries as XREADGROUP gives
them, and, when there are none, the id of the stream's last entry ('0-0' if empty), from which
the caller's XREAD waits without missing an entry added in between.
]]
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local reply = redis.call('XREADGROUP', 'GROUP', ARGV[2], ARGV[3], 'COUNT', ARGV[4],
  'STREAMS', KEYS[2], '>')
if reply then
  return {reply[1][2], ''}
end
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
return {{}, last[1] and last[1][1] or '0-0'}

-- Give a lease we still hold a new epoch, keeping its TTL. KEYS[1] lease, KEYS[2] epoch counter;
-- ARGV[1] the value we hold "<worker>:<epoch>", ARGV[2] worker id. Returns the new epoch, or
-- false if the lease is no longer ARGV[1].
-- Race closed: after a connection error, a commit or read sent on the broken connection may
-- still reach Redis later, carrying the old value; once the value changes it is fenced off
-- like any stale owner's, instead of landing on top of work the owner has redone since.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return false
end
local epoch = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[2] .. ':' .. epoch, 'KEEPTTL')
return epoch

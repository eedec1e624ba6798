-- Take or renew a partition lease. KEYS[1] lease, KEYS[2] epoch counter;
-- ARGV[1] worker id, ARGV[2] ttl in ms. Returns the epoch, or false if another worker holds it.
-- Race closed: two workers both seeing the lease free and both taking it (GET then SET), and an
-- epoch bumped by a worker that then loses the SET; check, INCR and SET are one step.
local current = redis.call('GET', KEYS[1])
if not current then
  local epoch = redis.call('INCR', KEYS[2])
  redis.call('SET', KEYS[1], ARGV[1] .. ':' .. epoch, 'PX', ARGV[2])
  return epoch
end
-- The epoch follows the last ':', so worker ids may contain ':' themselves.
local owner, epoch = string.match(current, '^(.*):(%d+)$')
if owner == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return tonumber(epoch)
end
return false

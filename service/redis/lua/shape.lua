--[[
Record the deployment's shape if nothing is recorded yet, raise its contract version, answer it
(service/shape.py).

Race closed: two processes starting at once with different partition counts (a producer and the
pool, or two pools) would each read "nothing recorded" and write their own count, the later write
silently replacing the one the earlier process already routes by. Checked and written in one
step, the first one wins and the other is answered the winner's count, which it then refuses or
follows. A worker raises the contract version in the same step, so two workers of different
builds starting at once leave the higher one.

KEYS[1] the shape hash; ARGV[1] partitions, ARGV[2] key prefix, ARGV[3] contract version,
ARGV[4] who records it ("pool" or "producer"): a pool also raises the recorded contract version.
Returns {partitions, prefix, contract, by} as recorded.
]]
if not redis.call('HGET', KEYS[1], 'partitions') then
  redis.call('HSET', KEYS[1], 'partitions', ARGV[1], 'prefix', ARGV[2], 'contract', ARGV[3],
    'by', ARGV[4])
elseif ARGV[4] == 'pool'
    and (tonumber(redis.call('HGET', KEYS[1], 'contract')) or 0) < tonumber(ARGV[3]) then
  redis.call('HSET', KEYS[1], 'contract', ARGV[3])
end
return redis.call('HMGET', KEYS[1], 'partitions', 'prefix', 'contract', 'by')

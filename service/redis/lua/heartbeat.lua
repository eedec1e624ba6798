--[[
Announce a live worker and list the live pool, by the server's clock.

Race closed: workers on hosts with skewed clocks disagreeing on who is alive; TIME, the
expiry sweep and the listing are one step on one clock.

KEYS[1] workers sorted set; ARGV[1] worker id, ARGV[2] ttl in ms (0: leave the pool)
Returns {now in ms, live worker ids in order}.
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if tonumber(ARGV[2]) > 0 then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
else
  redis.call('ZREM', KEYS[1], ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return {now, redis.call('ZRANGE', KEYS[1], 0, -1)}

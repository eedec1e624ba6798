-- Included by read.lua and round.lua (see service/redis/scripts.py): read.lua's work, on the
-- KEYS and ARGV it is given. read.lua's header documents both and the reply.
local function read_call(KEYS, ARGV)
  -- Before the lease: telling anyone that nothing is new moves nothing.
  local same = unchanged(KEYS[2], ARGV[5])
  if same then
    return same
  end
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return 0
  end
  return next_entries(KEYS[2], ARGV[2], ARGV[3], ARGV[4])
end

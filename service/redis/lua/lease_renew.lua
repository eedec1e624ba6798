-- Extend a lease only while it is still ours. KEYS[1] lease; ARGV[1] "<worker>:<epoch>", ARGV[2] ttl ms.
-- Race closed: our lease expires and another worker takes it between our GET and PEXPIRE, so we
-- would extend the new owner's lease and keep believing we own the partition.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0

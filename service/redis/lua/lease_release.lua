-- Give a lease up only while it is still ours. KEYS[1] lease; ARGV[1] "<worker>:<epoch>".
-- Race closed: our lease expires and another worker takes it between our GET and DEL, so we
-- would delete the new owner's lease and let a third worker in beside it.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0

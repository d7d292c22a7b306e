-- announce.lua: write a relock Client's identity hash with its TTL, in one
-- step, so that it never stands without one.
--
-- KEYS[1]   the identity hash of the client (layout.ClientKey)
-- ARGV[1]   its TTL in milliseconds
-- ARGV[2..] field, value, field, value...
--
-- Returns   1

redis.call('hset', KEYS[1], unpack(ARGV, 2))
redis.call('pexpire', KEYS[1], ARGV[1])
return 1

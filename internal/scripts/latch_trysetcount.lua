-- latch_trysetcount.lua: set a countdown latch's count if it is not set
-- (Redisson RCountDownLatch layout).
--
-- KEYS, ARGV  as in tryset.lua: KEYS[1] the count, ARGV[1] the count to
--          set, ARGV[4] the latch's channel, told "1" (new count)
--
-- Returns  1: set; 0: the latch was set already, nothing changed

return try_set('1')

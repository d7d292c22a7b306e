-- sem_trysetpermits.lua: set a semaphore's permits if it has none set.
--
-- KEYS[1]   permits (string: the number available)
-- KEYS[2]   request marker of this call, so that a retried request that
--           was applied still answers 1
-- KEYS[3..] markers of this client's answered requests, deleted
-- ARGV[1]   the number of permits (positive)
-- ARGV[2]   "publish" or "spublish"
-- ARGV[3]   request marker lifetime in milliseconds
-- ARGV[4]   channel, told the number set
--
-- Returns   1: set; 0: the semaphore was set already, nothing changed

-- The reads come first: Redis does not undo the writes of a script that
-- fails.
local done = redis.call('get', KEYS[2])
local set = not done and redis.call('exists', KEYS[1]) == 1
if #KEYS > 2 then
    redis.call('del', unpack(KEYS, 3))
end
if done then
    return tonumber(done)
end
if set then
    return 0
end
redis.call('set', KEYS[1], ARGV[1])
redis.call(ARGV[2], ARGV[4], ARGV[1])
redis.call('set', KEYS[2], '1', 'px', ARGV[3])
return 1

-- tryset.lua: setting a synchronizer's count once, for
-- sem_trysetpermits.lua and latch_trysetcount.lua; put between each
-- script's header and its body. Not a script of its own. Both take:
--
-- KEYS[1]   the count (string)
-- KEYS[2]   request marker of this call, so that a retried request that
--           was applied still answers 1
-- KEYS[3..] markers of this client's answered requests, deleted
-- ARGV[1]   the count to set (positive)
-- ARGV[2]   "publish" or "spublish"
-- ARGV[3]   request marker lifetime in milliseconds
-- ARGV[4]   the synchronizer's channel

-- try_set sets the count KEYS[1] to ARGV[1] if it is not set, publishes
-- message on the channel when it does, and returns 1: set (now, or by
-- an earlier try of the same request), or 0: set already, nothing
-- changed. The reads come first: Redis does not undo the writes of a
-- script that fails.
local function try_set(message)
    local done = redis.call('get', KEYS[2])
    local set = not done and redis.call('exists', KEYS[1]) == 1
    local replayed = replay(done)
    if replayed then
        return replayed
    end
    if set then
        return 0
    end
    redis.call('set', KEYS[1], ARGV[1])
    redis.call(ARGV[2], ARGV[4], message)
    redis.call('set', KEYS[2], '1', 'px', ARGV[3])
    return 1
end

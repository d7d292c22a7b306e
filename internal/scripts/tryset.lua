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
-- ARGV[5]   "1" for a permit semaphore's call: its held permits are
--           KEYS[2], and the markers follow them (see request.lua); may
--           be left out
--
-- A count of another type, or a string that is no integer, fails the
-- call with a WRONGTYPE error, as held permits of another type do.

-- try_set sets the count KEYS[1] to ARGV[1] if it is not set, publishes
-- message on the channel when it does, and returns 1: set (now, or by
-- an earlier try of the same request), or 0: set already, nothing
-- changed. The reads come first: Redis does not undo the writes of a
-- script that fails.
local function try_set(message)
    local _, at = held(ARGV[5] == '1')
    local marker = KEYS[at]
    local done = redis.call('get', marker)
    local set = false
    if not done then
        local count = redis.call('get', KEYS[1])
        if count and not string.match(count, '^%-?%d+$') then
            return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' holds no count')
        end
        set = count ~= false
    end
    local replayed = replay(done, at)
    if replayed then
        return replayed
    end
    if set then
        return 0
    end
    redis.call('set', KEYS[1], ARGV[1])
    redis.call(ARGV[2], ARGV[4], message)
    redis.call('set', marker, '1', 'px', ARGV[3])
    return 1
end

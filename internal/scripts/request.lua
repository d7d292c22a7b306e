-- request.lua: the request marker of a synchronizer's call that applies
-- once, for the scripts that take one; put between a script's header and
-- its body. Not a script of its own. Such a script takes:
--
-- KEYS[2]   request marker of this call: what an earlier try of the same
--           request returned, once one was applied
-- KEYS[3..] markers of this client's answered requests, deleted
--
-- A script that a permit semaphore's call runs too (tryset.lua,
-- sem_release.lua) takes, when its arguments say so, the semaphore's held
-- permits (a zset) as KEYS[2], and the markers after it (see held).

-- held returns the key of a permit semaphore's held permits, nil for
-- another synchronizer's call (given is false), and the index in KEYS of
-- the request's marker, which the answered ones follow. It fails the call,
-- before its first write, when the held permits are of another type than
-- a zset: Redis does not undo the writes of a script that fails.
local function held(given)
    if not given then
        return nil, 2
    end
    local kind = redis.call('type', KEYS[2]).ok
    if kind ~= 'zset' and kind ~= 'none' then
        error({err = 'WRONGTYPE the held permits ' .. KEYS[2] .. ' hold another type of value'})
    end
    return KEYS[2], 3
end

-- replay deletes the markers of answered requests, the KEYS after the
-- request's own at index at (nil: 2), and returns what an earlier try of
-- this request returned (done, the marker's value read by the caller), or
-- nil when none was applied. A script calls it once the reads that can
-- fail are done: Redis does not undo the writes of a script that fails.
local function replay(done, at)
    at = at or 2
    if #KEYS > at then
        redis.call('del', unpack(KEYS, at + 1))
    end
    return done and tonumber(done) or nil
end

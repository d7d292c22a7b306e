-- request.lua: the request marker of a synchronizer's call that applies
-- once, for the scripts that take one; put between a script's header and
-- its body. Not a script of its own. Such a script takes:
--
-- KEYS[2]   request marker of this call: what an earlier try of the same
--           request returned, once one was applied
-- KEYS[3..] markers of this client's answered requests, deleted

-- replay deletes the markers of answered requests and returns what an
-- earlier try of this request returned (done, the marker's value read by
-- the caller), or nil when none was applied. A script calls it once the
-- reads that can fail are done: Redis does not undo the writes of a
-- script that fails.
local function replay(done)
    if #KEYS > 2 then
        redis.call('del', unpack(KEYS, 3))
    end
    return done and tonumber(done) or nil
end

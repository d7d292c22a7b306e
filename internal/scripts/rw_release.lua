-- rw_release.lua: what the releases of a read-write lock's holds share
-- around their own work, for rw_read_unlock.lua and rw_write_unlock.lua;
-- put between each script's header and its body, after rw_queue.lua. Not
-- a script of its own. Both take, beside rw_queue.lua's:
--
-- KEYS[1]  lock hash (see rw_read_lock.lua)
-- KEYS[#KEYS]  marker, last, given with ARGV[4] "1" or "2" only, used as
--          ARGV[4] says
-- ARGV[4]  "0": no marker (one-shot owners, whose count is one)
--          "1": the marker is this release's: a retried release
--               returns the first answer instead of releasing again
--          "2": undo: the marker is the request marker of an acquisition
--               whose reply was lost; release only if it exists (it is
--               deleted)
-- ARGV[5]  release marker lifetime in milliseconds
--
-- Everything that may fail is read first (see rw_queue.lua): a lock of
-- another type fails the call before it writes. An undo keeps the
-- request marker it finds until the writes.

-- The release's marker, or false.
local marker = ARGV[4] ~= '0' and KEYS[#KEYS]

-- release_read reads the lock hash for the release: its HGETALL reply;
-- or nil and the release's reply when there is nothing to release (the
-- call leaving the queue, if any, has left it then): a key of another
-- type where a waiter leaves, a retried release's first answer, or an
-- undo of an acquisition that was never applied.
local function release_read()
    if ARGV[11] ~= '' and redis.call('type', KEYS[1]).ok ~= 'hash' then
        leave()
        return nil, 0 -- nothing to release, whatever the key holds
    end
    if ARGV[4] == '1' then
        local done = redis.call('get', marker)
        if done then
            leave()
            return nil, tonumber(done)
        end
    end
    local fields = redis.call('hgetall', KEYS[1])
    if ARGV[4] == '2' and redis.call('exists', marker) == 0 then
        leave()
        return nil, 0
    end
    return fields
end

-- releasing makes the writes every release starts with, whether it then
-- releases a hold or finds the owner holds none: an undo deletes its
-- request marker, and the call leaving the queue, if any, leaves it.
local function releasing()
    if ARGV[4] == '2' then
        redis.call('del', marker)
    end
    leave()
end

-- released returns result, the release's reply, recorded under the
-- release's own marker (ARGV[4] "1") for a retry to find.
local function released(result)
    if ARGV[4] == '1' then
        redis.call('set', marker, result, 'px', ARGV[5])
    end
    return result
end

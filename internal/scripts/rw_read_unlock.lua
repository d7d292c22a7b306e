-- rw_read_unlock.lua: release one read hold of a read-write lock, or undo
-- a read acquisition whose reply was lost.
--
-- KEYS[1]  lock hash (see rw_read_lock.lua)
-- KEYS[2..5]  as in rw_queue.lua (KEYS[5] with fencing mode "0" only)
-- KEYS[#KEYS]  marker, last, as in rw_release.lua
-- ARGV[1]  owner id
-- ARGV[2]  the lock's release channel, told Redisson's read release
--          message "0" when the lock becomes free
-- ARGV[3]  "publish" or "spublish"
-- ARGV[4..5]  the marker's, as in rw_release.lua
-- ARGV[6]  the rule of the lock's reader hold keys (see rw_read_lock.lua)
-- ARGV[7..14]  the grant's (see rw_queue.lua)
--
-- Returns  0: the owner holds no read hold here
--          1: one hold released; the lock is still held (by this owner
--             or others)
--          2: the last hold released, the lock is free
--          3: the last hold released, and the lock granted to the first
--             waiting writer (see rw_queue.lua)
--          a negative integer -(2t + p): the last hold released, and the
--             lock handed to the releasing client's writer ARGV[14], with
--             fencing token t; p is 1 when the tokens t + 1 to t + k are
--             reserved for passing it on in process (rw_queue.lua)
--
-- The owner's highest-numbered hold key goes with the hold. In read mode
-- the hash then lives exactly as long as the longest reader hold left;
-- readers whose hold keys have all expired (dead readers) are removed, and
-- when none is left the lock is freed, or granted to the next writer
-- (rw_queue.lua). As Redisson's read unlock, it publishes on the release
-- channel only when it deletes the lock. When the hash's life gets
-- shorter, the first waiter of each client in the queue is told on its
-- client's grant channel to check again by the new end ("n:<ttl>"), so
-- that a waiter told the longer TTL does not sleep past the lock's silent
-- expiry.

-- Everything that may fail is read first (see rw_release.lua). The one
-- HGETALL of the hash gives the mode, the owner's count and, in read mode,
-- the other readers, whose holds are read with it (readers_left).
local fields, reply = release_read()
if not fields then
    return reply
end
local mode, count
for i = 1, #fields, 2 do
    if fields[i] == 'mode' then
        mode = fields[i + 1]
    elseif fields[i] == ARGV[1] then
        count = tonumber(fields[i + 1])
    end
end
if mode == nil or count == nil then
    releasing()
    return 0
end
-- In write mode the owner is the writer too, who still holds the lock.
local longest, dead, queue, grantee, token, subs = 1, {}
local shorter = false -- the hash's life gets shorter
if mode == 'read' then
    longest, dead = readers_left(fields, ARGV[6], ARGV[1], count)
    if longest == 0 then
        queue, grantee, token, subs = freeing()
    else
        shorter = longest < redis.call('pttl', KEYS[1])
        if shorter then
            queue = queued()
        end
    end
end

-- The writes.
releasing()
redis.call('del', string.format(ARGV[6], ARGV[1], count))
local result = 1
if longest == 0 then
    result = free(queue, grantee, token, subs, '0')
else
    if count > 1 then
        redis.call('hincrby', KEYS[1], ARGV[1], -1)
    else
        redis.call('hdel', KEYS[1], ARGV[1])
    end
    if #dead > 0 then
        redis.call('hdel', KEYS[1], unpack(dead))
    end
    if mode == 'read' then
        redis.call('pexpire', KEYS[1], longest)
        if shorter then
            wake_clients(queue, ARGV[3], ARGV[9], ARGV[8], nil, longest)
        end
    end
end
return released(result)

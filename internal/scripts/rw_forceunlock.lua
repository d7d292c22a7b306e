-- rw_forceunlock.lua: delete a read-write lock whatever its holders, with
-- its reader hold keys, and wake its waiters.
--
-- KEYS[1]  lock hash (see rw_read_lock.lua)
-- KEYS[2]  queue of waiters (see rw_queue.lua)
-- KEYS[3]  guard (see rw_queue.lua): this script deletes reader hold keys
--          it cannot name among its KEYS
-- ARGV[1]  the lock's release channel, told "1" (Redisson's message for
--          the end of a write lock: every waiter checks again)
-- ARGV[2]  "publish" or "spublish"
-- ARGV[3]  the rule of the lock's reader hold keys (see rw_read_lock.lua)
-- ARGV[4]  grant channel of the calling client (see unlock.lua)
-- ARGV[5]  the calling client's "<uuid>"
--
-- Returns  1 if the lock was held and is now deleted, 0 if it was not held.
--          A key of another type is left alone and reported as an error.

local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
    return 0
end
if kind ~= 'hash' then
    return redis.error_reply('WRONGTYPE key holds a ' .. kind .. ', not a lock')
end
-- The queue is read before the first write: one of another type fails
-- the call before it deletes anything.
local queue = waiting(KEYS[2])
local fields = redis.call('hgetall', KEYS[1])
for i = 1, #fields, 2 do
    local n = tonumber(fields[i + 1])
    if is_reader(fields[i], n) then
        for j = 1, n do
            redis.call('del', string.format(ARGV[3], fields[i], j))
        end
    end
end
redis.call('del', KEYS[1])
redis.call(ARGV[2], ARGV[1], '1')
-- Readers, and writers known to listen, hear the message; the first other
-- writer of each Client is told (see rw_queue.lua).
wake_clients(queue, ARGV[2], ARGV[4], ARGV[5], '^%d+|[or]|')
return 1

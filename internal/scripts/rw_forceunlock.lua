-- rw_forceunlock.lua: delete a read-write lock whatever its holders, with
-- its reader hold keys, wake its waiters, and tell its holders' clients.
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
--          A key of another type, a hash that is no read-write lock's (see
--          lockhash.lua), or a reader hold key of another type than a
--          string, is left alone and reported as a WRONGTYPE error.
--
-- The client of each holder is told on its grant channel to check its
-- holds of the lock now (tell_holders in lockhash.lua).

local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
    return 0
end
if kind ~= 'hash' then
    return redis.error_reply('WRONGTYPE key holds a ' .. kind .. ', not a lock')
end
-- The hash, the reader hold keys and the queue are read before the first
-- write: anything there that no read-write lock writes fails the call
-- before it deletes anything.
local fields, holders = lock_clients(KEYS[1], true)
local holds = {}
for i = 1, #fields, 2 do
    local n = tonumber(fields[i + 1])
    if is_reader(fields[i], n) then
        for j = 1, n do
            local hold = string.format(ARGV[3], fields[i], j)
            local t = redis.call('type', hold)['ok']
            if t ~= 'none' and t ~= 'string' then
                not_a_lock(hold, 'a reader hold key holds a ' .. t)
            end
            holds[#holds + 1] = hold
        end
    end
end
local queue = waiting(KEYS[2])
for _, hold in ipairs(holds) do
    redis.call('del', hold)
end
redis.call('del', KEYS[1])
redis.call(ARGV[2], ARGV[1], '1')
-- Readers, and writers known to listen, hear the message; the first other
-- writer of each Client is told (see rw_queue.lua).
wake_clients(queue, ARGV[2], ARGV[4], ARGV[5], '^%d+|[or]|')
tell_holders(holders, ARGV[2], KEYS[1], function(c) return grant_channel(ARGV[4], ARGV[5], c) end)
return 1

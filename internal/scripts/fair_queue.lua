-- fair_queue.lua: the queue functions every fair_*.lua script uses. It is
-- not a script of its own: loading puts it between a script's header and
-- its body. Every fair script passes the same first four KEYS:
--
-- KEYS[1]  lock hash: field <owner> -> hold count
-- KEYS[2]  queue: list of waiting owners, oldest first
-- KEYS[3]  deadlines: zset owner -> server time in ms after which a waiter
--          that has not refreshed its entry counts as dead
-- KEYS[4]  channel prefix: waiter <owner> listens on KEYS[4] .. ':' .. <owner>
--
-- The queue and the zset hold the same owners, and are changed together,
-- so that both are deleted by Redis when the last waiter goes. Otherwise
-- they expire some time after the last deadline (see keep), so that
-- waiters that all die leave nothing behind.

local now
-- clock returns the server's time in milliseconds, read once per call.
local function clock()
    if not now then
        local t = redis.call('time')
        now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end
    return now
end

-- purge removes dead waiters from the head of the queue: those whose
-- deadline has passed, and those with no deadline at all (relock never
-- writes one; it would be a foreign client's leftover). Dead waiters
-- further back are removed when they reach the head. Returns the head
-- after the purge (false if none), whether the head changed, and the
-- head's deadline.
local function purge()
    local head = redis.call('lindex', KEYS[2], 0)
    local changed = false
    while head do
        local deadline = tonumber(redis.call('zscore', KEYS[3], head))
        if deadline and deadline > clock() then
            return head, changed, deadline
        end
        redis.call('lpop', KEYS[2])
        redis.call('zrem', KEYS[3], head)
        head = redis.call('lindex', KEYS[2], 0)
        changed = true
    end
    return false, changed
end

-- keep makes the queue keys live past every deadline in the zset (a
-- foreign client's may be later than the one just written): to the last
-- deadline + slack, so that most refreshes need no write.
local function keep(slack)
    local last = redis.call('zrange', KEYS[3], -1, -1, 'withscores')
    if not last[2] then
        return
    end
    local deadline = math.floor(tonumber(last[2])) + 1
    local ttl = redis.call('pttl', KEYS[2])
    if ttl >= 0 and clock() + ttl > deadline then
        return
    end
    redis.call('pexpireat', KEYS[2], deadline + slack)
    redis.call('pexpireat', KEYS[3], deadline + slack)
end

-- wake tells waiter owner, on its own channel, that the lock is free.
local function wake(owner, publish, message)
    redis.call(publish, KEYS[4] .. ':' .. owner, message)
end

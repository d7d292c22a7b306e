-- rw_queue.lua: the grant of a read-write lock to its next writer, for
-- the scripts that release a hold of it; put between each script's header
-- and its body, after queue.lua. Not a script of its own.
--
-- The lock's relock waiters queue in a zset (see rw_write_lock.lua) of
-- members "<lease ms>|<kind>|<owner>": kind "o" for a one-shot writer,
-- "r" for a reentrant writer, "R" for a reader. Every one of them also
-- listens on the release channel (its Client subscribes before it joins,
-- and leaves before it unsubscribes), since a holder that is not relock
-- only publishes there.
--
-- The release scripts share these KEYS and ARGV from position 4 on:
-- KEYS[4]  fencing counter of the lock's slot (see fence.lua)
-- KEYS[5]  the lock's own token key (see fence.lua)
-- KEYS[6]  queue of waiters
-- ARGV[7]  "numsub" or "shardnumsub", to count the channel's subscribers
-- ARGV[8]  the releasing client's "<uuid>"
-- ARGV[9]  grant channel of the releasing client (see unlock.lua)
-- ARGV[10] the longest, in milliseconds, a grant holds the lock before its
--          waiter has renewed it
-- ARGV[11] queue member to remove first (a waiter leaving); "" for none
-- ARGV[12] "1" to grant, "0" never to
-- ARGV[13] fencing mode (see fence.lua)
-- ARGV[14] queue member of a one-shot writer of the releasing client to
--          hand the lock to, with no message, when it is the first of the
--          queue; absent or "" for none

-- grant_writer grants the lock, just freed (its hash KEYS[1] deleted), to
-- the first of its queue if that is a one-shot writer and every
-- subscriber of the release channel KEYS[2] is a client with a call in
-- the queue (none is Redisson or a relock call not queued), and reports
-- whether it did. The writer is told on its client's grant channel; the
-- lock holds for at most ARGV[10] until it renews it. When the writer is
-- ARGV[14], the releasing client's own, it is not told: its second
-- result is the hold's fencing token, which the release's reply carries,
-- and the lock holds for the writer's lease.
local function grant_writer()
    if ARGV[12] ~= '1' then
        return false
    end
    local queue = waiting(KEYS[6])
    local first = queue[1]
    if first == nil or not string.match(first, '^%d+|o|') then
        return false
    end
    if redis.call('pubsub', ARGV[7], KEYS[2])[2] > clients_in(queue) then
        return false
    end
    local handed = first == ARGV[14] and client(first) == ARGV[8]
    local ttl = tonumber(string.match(first, '^(%d+)|'))
    if not handed then
        ttl = math.min(ttl, tonumber(ARGV[10]))
    end
    redis.call('zrem', KEYS[6], first)
    local token = fence(KEYS[4], KEYS[5], ARGV[13])
    redis.call('hset', KEYS[1], 'mode', 'write', owner_of(first) .. ':write', '1', token_field, token)
    redis.call('pexpire', KEYS[1], ttl)
    if handed then
        return true, token
    end
    tell_grant(queue, first, token, ttl, ARGV[3], ARGV[9], ARGV[8], ARGV[10])
    return true
end

-- free frees the lock on its last hold's release: it deletes the hash
-- KEYS[1] and grants the lock to the next writer (grant_writer), or else
-- publishes ARGV[2] on the release channel KEYS[2]. It returns the
-- release's reply: 2 (freed), 3 (granted by message) or -t (handed to
-- ARGV[14] with fencing token t).
local function free()
    redis.call('del', KEYS[1])
    local granted, token = grant_writer()
    if token then
        return -token
    elseif granted then
        return 3
    end
    redis.call(ARGV[3], KEYS[2], ARGV[2])
    return 2
end

-- leave_queue removes the member ARGV[11] of a call leaving the queue, if
-- any, and reports whether the lock hash is missing (nothing to release).
local function leave_queue()
    if ARGV[11] == '' then
        return false
    end
    redis.call('zrem', KEYS[6], ARGV[11])
    return redis.call('type', KEYS[1]).ok ~= 'hash'
end

-- rw_queue.lua: the grant of a read-write lock to its next writer, for
-- the scripts that release a hold of it; put between each script's header
-- and its body, after queue.lua. Not a script of its own.
--
-- The lock's relock waiters queue in a zset (see rw_write_lock.lua) of
-- members "<lease ms>|<kind>|<owner>": kind "R" for a reader, "O" for a
-- one-shot writer, "o" for a one-shot writer that may not listen on the
-- release channel, "r" for a reentrant writer. Readers, and writers that
-- have seen a holder other than a relock writer (the read mode, whose
-- readers carry no mark of their client, or a writer without
-- relock_token), listen on the release channel, since such a holder only
-- publishes there. A reader or an "O" joins only once its Client's
-- subscription is confirmed, and leaves before its Client unsubscribes;
-- so every Client with such a member in the queue listens. Writers that
-- do not listen ("o", and "r", which may listen or not) are told on their
-- Client's grant channel when the lock is freed without a grant to them,
-- or turns to read mode.
--
-- The release scripts share these KEYS and ARGV:
-- KEYS[2]  fencing counter of the lock's slot (see fence.lua)
-- KEYS[3]  queue of waiters
-- KEYS[4]  guard: the name of the lock's release channel, which no key
--          has. A node whose slot migrates refuses, in the middle of a
--          script and after its first writes, a command on a key it does
--          not have, and the release scripts delete the lock and write it
--          again, and touch reader hold keys they cannot name among their
--          KEYS; with the guard such a node answers them TRYAGAIN until
--          the migration ends instead (see docs/design.md, Scripts)
-- KEYS[5]  the lock's own token key (see fence.lua), given with fencing
--          mode "0" only (see token_key)
-- ARGV[2]  the lock's release channel
-- ARGV[7]  "numsub" or "shardnumsub", to count the channel's subscribers
-- ARGV[8]  the releasing client's "<uuid>"
-- ARGV[9]  grant channel of the releasing client (see unlock.lua)
-- ARGV[10] the longest, in milliseconds, a grant holds the lock before its
--          waiter has renewed it
-- ARGV[11] queue member to remove (a waiter leaving; see leave below); ""
--          for none
-- ARGV[12] "1" to grant, "0" never to
-- ARGV[13] fencing mode (see fence.lua): "0" when KEYS[5] is the lock's
--          own token key, "1" when the call has none
-- ARGV[14] queue member of a one-shot writer of the releasing client to
--          hand the lock to, with no message, when the first of the queue
--          is that writer, none, or another writer of the same client (it
--          need not be in the queue: a writer that waits for its client's
--          writers' turn is not); absent or "" for none
--
-- A hand to ARGV[14] reserves k fencing tokens for passing the lock on in
-- process when no one else could be owed it (may_pass below), as
-- unlock.lua's grants to the releasing client's own waiter do; the
-- switches that pass it on are rw_write_unlock.lua's.

-- token_key is the lock's own token key, nil when the call has none.
local token_key = ARGV[13] == '0' and KEYS[5] or nil

-- k is how many tokens a hand reserves for passing on in process
-- (runBlock in pass.go, which a test compares with it).
local k = 8

-- may_pass reports whether the releasing client may pass a write hold on
-- in process: the queue (a ZRANGE WITHSCORES reply, without the holder's
-- own member) holds only one-shot writers of the client, and no one
-- listens on the release channel but the client, when one of them does;
-- subs is the channel's subscriber count. Any reader, reentrant writer or
-- other client in the queue, or a subscriber not known to listen, ends
-- the passing, so that the client's run never keeps the lock from them.
local function may_pass(queue, subs)
    for i = 1, #queue, 2 do
        if client(queue[i]) ~= ARGV[8] or not string.match(queue[i], '^%d+|[oO]|') then
            return false
        end
    end
    return subs <= clients_in(queue, '^%d+|O|')
end

-- leaving returns the queue members of the call leaving the queue
-- (ARGV[11]): its member and, for an "O", the "o" it may not have
-- replaced; nothing when no call leaves.
local function leaving()
    if ARGV[11] == '' then
        return
    end
    local lease, owner = string.match(ARGV[11], '^(%d+)|O|(.*)$')
    if lease then
        return ARGV[11], lease .. '|o|' .. owner
    end
    return ARGV[11]
end

-- queued returns the lock's queue of waiters KEYS[3] (a ZRANGE WITHSCORES
-- reply) without the call leaving it, which leave takes out of it with the
-- release's writes.
local function queued()
    local queue = waiting(KEYS[3])
    if ARGV[11] ~= '' then
        queue = without(queue, leaving())
    end
    return queue
end

-- leave takes the call leaving (ARGV[11]), if any, out of the queue.
local function leave()
    if ARGV[11] ~= '' then
        redis.call('zrem', KEYS[3], leaving())
    end
end

-- Redis does not undo the writes of a script that fails, so a release
-- reads everything it needs, and draws the fencing token of a grant
-- (fence fails, on a fencing counter that holds no number, before it
-- writes), before its first write; the writes that follow cannot fail.

-- next_writer returns the one-shot writer a release that frees the lock
-- grants it to, and the release channel's subscriber count, or nothing:
-- ARGV[14] where it may be handed (see above), or else the first of
-- queue, its queue of waiters (a ZRANGE WITHSCORES reply); only if every
-- subscriber of the release channel ARGV[2] is a client known to listen,
-- with a reader or an "O" in the queue (none is Redisson, a relock writer
-- not known to listen, or a relock call not queued). So a client's
-- releases may hand the lock to its own writers ahead of its own first;
-- never ahead of another client's, and every one of the client's writers
-- that sleeps is handed it in turn.
local function next_writer(queue)
    if ARGV[12] ~= '1' then
        return
    end
    local first, grantee = queue[1], ARGV[14]
    if not grantee or grantee == '' or client(grantee) ~= ARGV[8]
        or (first and first ~= grantee and not (client(first) == ARGV[8] and string.match(first, '^%d+|[oOr]|'))) then
        grantee = first
    end
    if grantee == nil or not string.match(grantee, '^%d+|[oO]|') then
        return
    end
    -- The clients known to listen: with a reader or an "O" in the queue.
    local subs = redis.call('pubsub', ARGV[7], ARGV[2])[2]
    if subs > clients_in(queue, '^%d+|[RO]|') then
        return
    end
    return grantee, subs
end

-- freeing reads what freeing the lock on its last hold's release does,
-- for free: the queue (queued), and the writer it grants the lock to, if
-- any (next_writer), with the fencing token drawn for it and the
-- subscriber count.
local function freeing()
    local queue = queued()
    local grantee, subs = next_writer(queue)
    local token
    if grantee then
        if grantee ~= ARGV[14] or client(grantee) ~= ARGV[8] then
            now_ms() -- read for tell_grant (free) before the writes
        end
        token = fence(KEYS[2], token_key)
    end
    return queue, grantee, token, subs
end

-- announce publishes msg on the release channel ARGV[2] and tells the
-- writers of queue (a ZRANGE WITHSCORES reply) that may not listen there
-- (see above) to check again now: the lock was freed without a grant to
-- them, or turned to read mode.
local function announce(msg, queue)
    redis.call(ARGV[3], ARGV[2], msg)
    wake_clients(queue, ARGV[3], ARGV[9], ARGV[8], '^%d+|[or]|')
end

-- free frees the lock as freeing read it: it deletes the hash KEYS[1] and
-- grants the lock to grantee with token, or else announces msg. The
-- first of the queue is told on its client's grant channel, and the lock
-- holds for at most ARGV[10] until it renews it; ARGV[14] is not told: the
-- reply carries its token, whether k tokens after it are reserved for
-- passing it on (may_pass), and the lock holds for the writer's lease. It
-- returns the release's reply: 2 (freed), 3 (granted by message) or
-- -(2t + p) (handed to ARGV[14] with fencing token t; p is 1 when the
-- tokens t + 1 to t + k are reserved for passing it on in process).
local function free(queue, grantee, token, subs, msg)
    redis.call('del', KEYS[1])
    if not grantee then
        announce(msg, queue)
        return 2
    end
    local handed = grantee == ARGV[14] and client(grantee) == ARGV[8]
    local ttl = tonumber(string.match(grantee, '^(%d+)|'))
    if not handed then
        ttl = math.min(ttl, tonumber(ARGV[10]))
    end
    redis.call('zrem', KEYS[3], grantee)
    redis.call('hset', KEYS[1], 'mode', 'write', owner_of(grantee) .. ':write', '1', token_field, token)
    redis.call('pexpire', KEYS[1], ttl)
    if not handed then
        tell_grant(queue, grantee, token, ttl, ARGV[3], ARGV[9], ARGV[8], ARGV[10])
        return 3
    end
    if may_pass(without(queue, grantee), subs) then
        -- Cannot fail: fence has just drawn from the same keys.
        reserve(KEYS[2], token_key, k)
        return -(2 * token + 1)
    end
    return -2 * token
end

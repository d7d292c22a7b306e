-- fair_queue.lua: the queue functions every fair_*.lua script uses. It is
-- not a script of its own: loading puts it between a script's header and
-- its body. Every fair script passes the same first four KEYS:
--
-- KEYS[1]  lock hash: field <owner> -> hold count
-- KEYS[2]  queue: list of waiting owners, oldest first
-- KEYS[3]  waiting budgets: zset owner -> time in ms (Redisson's timeout
--          set, see below)
-- KEYS[4]  relock's liveness of its own waiters: hash owner ->
--          "<deadline>:<lease>:<joined>[:r]", the server time in ms after
--          which a relock waiter that has not refreshed its entry counts as
--          dead, the lease it may be granted by another client's release,
--          the server time in ms its entry was made, and ":r" when only
--          relock's waiters can be ahead of it (see join); relock's key
--          alone, with a TTL past the score of every relock entry, so
--          that a relock waiter is never judged by its score
--
-- and the prefix of its waiters' own channels, as an argument
-- (layout.WaiterChannels): a waiter <owner> of another client (Redisson)
-- listens on that prefix .. <owner>;
-- relock's waiters listen on their client's grant channel (see tell).
--
-- The scripts that may empty the queue keys and touch them after, or
-- delete the lock and write it again (fair_unlock, fair_pass, fair_leave,
-- fair_forceunlock), also take a guard among their KEYS: the name of the
-- lock's release channel, which no key has. A node whose slot migrates
-- refuses, in the middle of a script and after its first writes, a
-- command on a key it does not have; with the guard it answers such a
-- call TRYAGAIN until the migration ends instead (see docs/design.md,
-- Scripts). fair_lock and fair_tell touch no key that may be gone.
--
-- The queue and the zset are shared with Redisson and hold the same
-- owners. They are changed together and never given a TTL: Redis deletes
-- them when the last waiter goes, and an entry leaves only when its owner
-- is granted the lock or gives up, or when it is dead at the head.
--
-- Redisson's arithmetic on the zset: a new entry gets the score of the
-- entry before it (or now + the lock's PTTL) plus the thread's wait time,
-- every grant to a queued waiter lowers every score by that waiter's wait
-- time, and a waiter that gives up lowers the scores behind it by its own.
-- relock does the same with QUEUE_WAIT (Redisson's default wait time), and
-- keeps its entries at least QUEUE_WAIT per waiter ahead of them, plus the
-- waiter timeout, in the future, so that they outlive every lowering the
-- waiters ahead of them will make.
--
-- Redis does not undo the writes of a script that fails, so a script
-- reads the queue keys before its first write and writes after:
-- live_head, budgets, place and following only read, and purge, take and
-- leave write what they read. A key of another type fails a read with
-- WRONGTYPE before anything is written; the writes that only take entries
-- out, or lower scores, pass over one (see pass_over), and join reads
-- what it writes or writes it first.

-- QUEUE_WAIT is what one waiter adds to the scores behind it, in ms:
-- Redisson's default fair lock wait time (fairLockWaitTimeout).
local QUEUE_WAIT = 300000
local ALIVE = KEYS[4]

-- deadline returns when waiter owner counts as dead: for a relock waiter
-- its liveness deadline, for any other its score (Redisson's rule); nil
-- for an entry without a score. It returns owner's liveness entry too,
-- false for none.
local function deadline(owner)
    local alive = redis.call('hget', ALIVE, owner)
    if alive then
        return tonumber(string.match(alive, '^%d+')), alive
    end
    return tonumber(redis.call('zscore', KEYS[3], owner)), false
end

-- pass_over runs cmd, a write that takes entries out of key or lowers
-- their scores (the waiting budgets or the liveness hash). A key of
-- another type holds no entries: it is left alone, without an error, so
-- that such a write may come after a script's other writes. (Another
-- error, such as NOPERM, is raised as the server gives it.)
local function pass_over(cmd, key, ...)
    local r = redis.pcall(cmd, key, ...)
    if type(r) == 'table' and r.err then
        if not string.find(r.err, 'WRONGTYPE', 1, true) then
            return redis.call(cmd, key, ...)
        end
        return 0
    end
    return r
end

-- drop removes owner's score and liveness, once it is out of the list;
-- with the list gone (others false: no one else is in it, as the caller
-- read before its first write), relock's liveness hash goes too. Returns
-- whether owner had a score or a liveness.
local function drop(owner, others)
    local n = pass_over('zrem', KEYS[3], owner) + pass_over('hdel', ALIVE, owner)
    if not others then
        redis.call('del', ALIVE)
    end
    return n > 0
end

-- live_head reads the queue from its head past the dead waiters, which
-- purge removes, as Redisson does, without changing any other score; an
-- entry without a score is dead too. Dead waiters further back are
-- removed when they reach the head. head, when given, is the head read
-- already. Returns the first live head (false if none), the dead waiters
-- ahead of it (a list, in order), the head's deadline and its liveness
-- entry (false for none).
local function live_head(head)
    if head == nil then
        head = redis.call('lindex', KEYS[2], 0)
    end
    local dead = {}
    while head do
        local d, alive = deadline(head)
        if d and d > now_ms() then
            return head, dead, d, alive
        end
        dead[#dead + 1] = head
        head = redis.call('lindex', KEYS[2], #dead)
    end
    return false, dead
end

-- purge removes dead, the dead waiters live_head found at the head of
-- the queue; head is the live head it found behind them (false: none,
-- and the list is empty once they are gone).
local function purge(dead, head)
    for i = 1, #dead do
        redis.call('lpop', KEYS[2])
        drop(dead[i], head or i < #dead)
    end
end

-- budgets reads the waiting budgets with their scores (a ZRANGE
-- WITHSCORES reply), for take.
local function budgets()
    return redis.call('zrange', KEYS[3], 0, -1, 'withscores')
end

-- take removes owner, the head, from the queue as it is granted the lock,
-- and lowers every other score by QUEUE_WAIT, as a Redisson grant does.
-- rest is what budgets read, and after whether anyone is in the list
-- behind owner, both read before the script's first write; gone, when
-- given, lists waiters purged since, whose scores are gone.
local function take(owner, rest, after, gone)
    redis.call('lpop', KEYS[2])
    local skip = {[owner] = true}
    for _, o in ipairs(gone or {}) do
        skip[o] = true
    end
    -- Every other score lowered, with one ZADD per 200 waiters.
    local lowered = {}
    for i = 1, #rest, 2 do
        if not skip[rest[i]] then
            lowered[#lowered + 1] = tonumber(rest[i + 1]) - QUEUE_WAIT
            lowered[#lowered + 1] = rest[i]
        end
        if #lowered == 400 or (i + 1 == #rest and #lowered > 0) then
            redis.call('zadd', KEYS[3], unpack(lowered))
            lowered = {}
        end
    end
    drop(owner, after)
end

-- place reads where owner is in the queue, for leave: its index (false:
-- not queued), the waiters behind it, and whether anyone else is in the
-- list: known from the rest when owner is in it, else read.
local function place(owner)
    local at = redis.call('lpos', KEYS[2], owner)
    if not at then
        return false, {}, redis.call('exists', KEYS[2]) == 1
    end
    local behind = redis.call('lrange', KEYS[2], at + 1, -1)
    return at, behind, at > 0 or #behind > 0
end

-- leave removes owner from anywhere in the queue and lowers the scores of
-- the waiters behind it by QUEUE_WAIT, as a Redisson waiter that gives up
-- does; at, behind and others are what place read (others: whether
-- anyone else is left in the list). Returns whether owner was queued.
local function leave(owner, at, behind, others)
    if not at then
        return drop(owner, others)
    end
    for i = 1, #behind do
        pass_over('zincrby', KEYS[3], -QUEUE_WAIT, behind[i])
    end
    redis.call('lrem', KEYS[2], 0, owner)
    drop(owner, others)
    return true
end

-- following reads the k members of the queue (k a string; absent or "0":
-- none) from index from on: the queue's next heads once the ones ahead of
-- them have left, for pass_to.
local function following(from, k)
    local n = tonumber(k) or 0
    if n == 0 then
        return {}
    end
    return redis.call('lrange', KEYS[2], from, from + n - 1)
end

-- grantable returns, for relock waiter owner, the lease in ms for which a
-- release of another client may grant it the lock (see fair_unlock.lua)
-- and how long ago its entry was made, in ms; or nil. alive, when not
-- nil, is owner's liveness entry read already (false for none).
local function grantable(owner, alive)
    if alive == nil then
        alive = redis.call('hget', ALIVE, owner)
    end
    if not alive then
        return nil
    end
    local lease, joined = string.match(alive, '^%d+:(%d+):(%d+)')
    lease, joined = tonumber(lease), tonumber(joined)
    if lease and joined and lease > 0 then
        return lease, math.max(now_ms() - joined, 0)
    end
    return nil
end

-- others_ahead reports whether anyone but relock's waiters is among the
-- first at waiters of the queue from index from on, at > 0: a Redisson
-- client's release then tells the next head on its own channel, which a
-- relock waiter behind them must listen on. Over 16 ahead it says yes
-- without looking.
local function others_ahead(at, from)
    if at > 16 then
        return true
    end
    local ahead = redis.call('lrange', KEYS[2], from, from + at - 1)
    for _, a in ipairs(redis.call('hmget', ALIVE, unpack(ahead))) do
        if not a then
            return true
        end
    end
    return false
end

-- join puts owner at the end of the queue, or refreshes its entry: its
-- liveness deadline becomes now + timeout, and its score at least now +
-- timeout + QUEUE_WAIT for each waiter ahead of it (a new entry also gets
-- at least Redisson's score for it). Scores are never lowered here. The
-- liveness entry is "<deadline>:<lease>:<joined>[:r]", lease the waiter's
-- for a grant by another client's release (0 when it takes none), joined
-- when the entry was made, kept by every refresh: a grant tells its waiter
-- how long ago that was, which no later attempt of the waiter changes.
-- ttl is the lock's PTTL, read already; new is true when owner cannot be
-- in the queue yet, which spares the search for it; dead, the dead
-- waiters the caller purges from the head of the queue between join's
-- reads and its writes (nil: none).
--
-- join only reads, before the caller's first write, and returns the
-- function that makes its writes. That function returns whether anyone
-- but relock's waiters may be ahead of owner (see others_ahead), and the
-- liveness deadline of the relock waiter directly ahead of it (nil for
-- none): if that one has died, it holds up the queue until then at most
-- (a grant to it ends by then too; see fair_unlock.lua), and owner is the
-- one to move on then. An entry marked ":r" had only relock's waiters
-- ahead of it, and so has for good: entries join only at the tail and
-- only leave from the rest, so no one can come ahead of it. A new entry
-- behind a marked one of relock's is marked without a look at the queue.
local function join(owner, timeout, lease, ttl, new, dead)
    dead = dead or {}
    local purged = #dead
    local at = false
    if not new then
        at = redis.call('lpos', KEYS[2], owner)
        if at and at < purged then
            at = false -- dead, purged with the others: it joins anew
        end
    end
    local score -- an owner not in the list has no score to keep: relock never uses an owner id twice
    local joined = now_ms()
    local clear
    local ahead -- the liveness entry of the waiter directly ahead, false for none
    local empty = false -- the queue is empty
    if at then
        score = tonumber(redis.call('zscore', KEYS[3], owner))
        local old = redis.call('hget', ALIVE, owner)
        joined = tonumber(old and string.match(old, '^%d+:%d+:(%d+)')) or joined
        clear = old and string.sub(old, -2) == ':r'
        if at > purged then
            ahead = redis.call('hget', ALIVE, redis.call('lindex', KEYS[2], at - 1))
        end
        at = at - purged
    else
        -- The tail is not purged: purged waiters are followed by a live one.
        local last = redis.call('lindex', KEYS[2], -1)
        local base = last and tonumber(redis.call('zscore', KEYS[3], last))
        if not base then
            base = now_ms() + math.max(ttl, 0)
        end
        if last then
            ahead = redis.call('hget', ALIVE, last)
            clear = ahead and string.sub(ahead, -2) == ':r'
        end
        score = base + QUEUE_WAIT
        empty = not last
    end
    -- The liveness hash's lifetime, read before the first write. In an
    -- empty queue nothing above has read the hash or the budgets: a hash
    -- found missing is of no other type, one found is read (HLEN), and the
    -- budgets are written first, which fails on a key of another type
    -- before anything is written.
    local kept = redis.call('pttl', ALIVE)
    -- A purge that takes every entry out of the hash deletes it, and with
    -- it the lifetime just read.
    if purged > 0 and kept ~= -2 then
        local n = 0
        for _, a in ipairs(redis.call('hmget', ALIVE, unpack(dead))) do
            if a then
                n = n + 1
            end
        end
        if n == redis.call('hlen', ALIVE) then
            kept = -2
        end
    end
    local push = not at
    if empty then
        if kept ~= -2 then
            redis.call('hlen', ALIVE)
        end
        at = 0
    elseif push then
        at = redis.call('llen', KEYS[2]) - purged
    end
    local other = false
    if at > 0 and not clear then
        other = others_ahead(at, purged)
    end
    return function()
        local alive = now_ms() + timeout
        score = math.max(score or 0, alive + at * QUEUE_WAIT)
        if push and not empty then
            redis.call('rpush', KEYS[2], owner)
        end
        redis.call('zadd', KEYS[3], score, owner)
        if empty then
            redis.call('rpush', KEYS[2], owner)
        end
        local entry = alive .. ':' .. (lease or '0') .. ':' .. joined
        if not other then
            entry = entry .. ':r'
        end
        redis.call('hset', ALIVE, owner, entry)
        -- The hash outlives the entry's score by at least its waiter timeout,
        -- so that no relock entry is ever judged by its score (a dead one
        -- would hold up the queue until then) while relock's scripts look at
        -- it; set again every two waiter timeouts or so. (HSET keeps the
        -- lifetime read above.)
        local keep = score - now_ms() + timeout
        if kept < keep then
            redis.call('pexpire', ALIVE, keep + 2 * timeout)
        end
        return other, ahead and tonumber(string.match(ahead, '^%d+'))
    end
end

-- relock_client returns the "<uuid>" of waiter owner's client when owner
-- is a relock waiter (one with a liveness entry) and grants, the prefix
-- of the grant channels of the lock's slot, is given; else nil. alive,
-- when not nil, is owner's liveness entry read already (false for none).
local function relock_client(owner, grants, alive)
    if not grants or grants == '' then
        return nil
    end
    if alive == nil then
        alive = redis.call('hexists', ALIVE, owner) == 1
    end
    if not alive then
        return nil
    end
    return string.match(owner, '^(.*):%d+$')
end

-- tell publishes news for waiter owner: to a relock waiter on its
-- client's grant channel, grants .. "<uuid>", as kind .. ':' .. body ..
-- owner ("fg:<token>:<ttl>:<age>:<owner>", a grant; "fn:<owner>", check
-- now), so that a client listens on one channel for all its waiters;
-- to any other on its own channel, waiters .. owner, waiters being the
-- prefix of the waiters' channels, as old (Redisson's way). c is owner's
-- client if known (relock_client).
local function tell(owner, publish, waiters, grants, c, kind, body, old)
    if c then
        redis.call(publish, grants .. c, kind .. ':' .. body .. owner)
    else
        redis.call(publish, waiters .. owner, old)
    end
end

-- wake tells waiter owner that the lock is free (see tell): a Redisson
-- waiter is told Redisson's release message "0". alive is as for
-- relock_client.
local function wake(owner, publish, waiters, grants, alive)
    tell(owner, publish, waiters, grants, relock_client(owner, grants, alive), 'fn', '', '0')
end

-- pass_to returns those of list, the queue's next heads as following
-- read them, that are live waiters of the client of owner (a field
-- "<uuid>:<n>"), in order, up to the first that is not: the heads for
-- which the caller reserves as many fencing tokens (reserved, below) for
-- passing the lock on to them in process (see fair_pass.lua). It only
-- reads, before the caller's first write.
local function pass_to(owner, list)
    if #list == 0 then
        return {}
    end
    local alive = redis.call('hmget', ALIVE, unpack(list))
    -- The head must be a live relock waiter: a dead one is left for the
    -- next release to purge, and none is named.
    local d = alive[1] and tonumber(string.match(alive[1], '^%d+'))
    if not d or d <= now_ms() then
        return {}
    end
    local self = string.match(owner, '^(.*):%d+$')
    local heads = {}
    for i, o in ipairs(list) do
        if string.match(o, '^(.*):%d+$') ~= self or not alive[i] then
            break
        end
        heads[#heads + 1] = o
    end
    return heads
end

-- reserved returns the first of the fencing tokens reserved for heads,
-- as pass_to read them, or 0 for none; the lock's fencing keys are
-- KEYS[5] and named (see fence.lua). It draws them after any token the
-- caller draws for its grantee, and before the caller's other writes:
-- reserve fails, if it does, before it writes.
local function reserved(heads, named)
    if #heads == 0 then
        return 0
    end
    return reserve(KEYS[5], named, #heads)
end

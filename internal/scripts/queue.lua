-- queue.lua: the functions of the scripts that read a Mutex's queue of
-- waiters (see lock.lua and unlock.lua). It is not a script of its own:
-- loading puts it between a script's header and its body. A member is
-- "<lease ms>|<kind>|<owner>", and an owner "<uuid>:<n>".

-- grant_ttl is the longest, in milliseconds, that a grant to another
-- client's waiter holds the lock before that waiter renews it (grantTTL in
-- grant.go, which a test compares with it); a queue outlives its holder by
-- at least as much.
local grant_ttl = 2000

-- waiting returns the first 64 members of the queue key, with their
-- scores (a ZRANGE WITHSCORES reply); none when it does not exist, which
-- an EXISTS tells for a third of what an empty ZRANGE costs. exists, when
-- not nil, is whether the key exists, already read.
local function waiting(key, exists)
    if exists == nil then
        exists = redis.call('exists', key) == 1
    end
    if not exists then
        return {}
    end
    return redis.call('zrange', key, 0, 63, 'withscores')
end

-- without returns queue (a ZRANGE WITHSCORES reply) without the members
-- a and b (b may be nil): what it holds once they have left, for a script
-- that takes them out only once nothing can fail any more.
local function without(queue, a, b)
    local rest = {}
    for i = 1, #queue, 2 do
        if queue[i] ~= a and queue[i] ~= b then
            rest[#rest + 1] = queue[i]
            rest[#rest + 1] = queue[i + 1]
        end
    end
    return rest
end

-- unqueue takes members out of the queue key, if there. A key of another
-- type holds none of them: it is left alone, without an error, so that a
-- script may call unqueue after its other writes. (Another error, such
-- as NOPERM, is raised as the server gives it.)
local function unqueue(key, ...)
    local r = redis.pcall('zrem', key, ...)
    if type(r) == 'table' and not string.find(r.err, 'WRONGTYPE', 1, true) then
        redis.call('zrem', key, ...)
    end
end

-- client returns the "<uuid>" of a member's owner.
local function client(member)
    return string.match(member, '^%d+|%a|(.*):%d+$')
end

-- owner_of returns a member's owner.
local function owner_of(member)
    return string.match(member, '^%d+|%a|(.*)$')
end

-- grant_channel returns the grant channel of client c, given the channel
-- prefix of client self: prefix with self's "<uuid>" replaced by c's.
local function grant_channel(prefix, self, c)
    local at = string.find(prefix, self, 1, true)
    return string.sub(prefix, 1, at - 1) .. c .. string.sub(prefix, at + #self)
end

-- wake_clients tells the first waiter of each client in queue, a ZRANGE
-- WITHSCORES reply, to check again on its grant channel: now, when the
-- lock was freed without a grant, or, with by, within by ms, when the lock
-- will expire by then ("n:<by>:<owner>"). With only, a pattern, it tells
-- the first waiter of each client among the members that match it.
local function wake_clients(queue, publish, prefix, self, only, by)
    local told = {}
    local msg = 'n:' .. (by or 0) .. ':'
    for i = 1, #queue, 2 do
        local c = client(queue[i])
        if c and not told[c] and (not only or string.match(queue[i], only)) then
            told[c] = true
            redis.call(publish, grant_channel(prefix, self, c), msg .. owner_of(queue[i]))
        end
    end
end

-- join_queue adds member to the queue key, scored by the server time,
-- unless it is there already, and keeps the queue for at least extra ms
-- past ttl, the holder's TTL (counted as at least a second). It returns
-- whether member was added.
local function join_queue(key, member, ttl, extra)
    local added = redis.call('zadd', key, 'nx', now_ms(), member) == 1
    local keep = math.max(ttl, 1000) + tonumber(extra)
    if redis.call('pttl', key) < keep then
        redis.call('pexpire', key, keep)
    end
    return added
end

-- clients_in counts the clients with a member in queue, a ZRANGE
-- WITHSCORES reply; with only, a pattern, a member that matches it.
local function clients_in(queue, only)
    local seen, n = {}, 0
    for i = 1, #queue, 2 do
        local c = client(queue[i])
        if c and not seen[c] and (not only or string.match(queue[i], only)) then
            seen[c] = true
            n = n + 1
        end
    end
    return n
end

-- tell_grant announces on its client's grant channel the grant of a lock
-- to grantee, a member of queue (a ZRANGE WITHSCORES reply), with fencing
-- token token and a life of ttl ms: "g:<token>:<ttl>:<ms since it
-- joined>:<owner>". A grant lives at most most ms until its waiter renews
-- it; if it dies, every waiting call learns of the end by its next
-- attempt, which no call defers longer than that (see grant.go). A grant
-- shorter than most is the waiter's own short lease, which may run out
-- unannounced: the first waiter of the next client in the queue is told to
-- check again by then, "n:<ttl>:<owner>".
local function tell_grant(queue, grantee, token, ttl, publish, prefix, self, most)
    local to = client(grantee)
    local now = now_ms()
    local age = 0
    for i = 1, #queue, 2 do
        if queue[i] == grantee then
            age = math.max(now - tonumber(queue[i + 1]), 0)
        end
    end
    redis.call(publish, grant_channel(prefix, self, to), 'g:' .. token .. ':' .. ttl .. ':' .. age .. ':' .. owner_of(grantee))
    if ttl >= tonumber(most) then
        return
    end
    for i = 1, #queue, 2 do
        local c = client(queue[i])
        if c and c ~= to then
            redis.call(publish, grant_channel(prefix, self, c), 'n:' .. ttl .. ':' .. owner_of(queue[i]))
            break
        end
    end
end

-- fence.lua: the fencing functions of the scripts that grant locks. It is
-- not a script of its own: loading puts it between a script's header and
-- its body. Each script passes the lock's fencing keys, both in the
-- lock's hash slot:
--
-- counter  the fencing counter the lock shares with every lock of its
--          slot: one per server, or one per slot on a cluster
--          (layout.Fencing). No TTL; never more than one per slot.
-- named    the lock's own token key (layout.Token), the layout of
--          Redisson's RFencedLock, kept without TTL: among the
--          script's KEYS, and passed here, only from a Client with
--          WithPerNameTokens (fencing mode "0"); nil otherwise, and the
--          call neither reads nor writes it.
--
-- The invariant: the counter is at least every token ever handed by
-- relock for a lock of its slot, and the named key at least every token
-- handed by a Client that keeps it (and by RFencedLock, which increments
-- it). A new token is one above each that the call reads, so tokens only
-- grow per name among relock's Clients with and without the option, and
-- with RFencedLock's for the Clients that keep the named key.

-- The field of a lock hash that holds the current holder's token: the
-- caller of fence writes it with the holder's own field, in one HSET.
local token_field = 'relock_token'
-- The field of a Mutex's or FairMutex's hash that holds when its holder
-- was granted it, in unix ms: written with the token, by the acquiring
-- client's clock or, for a grant by a release, the server's (not a
-- read-write lock's, whose Redisson scripts take every numeric field for a
-- reader's hold count).
local since_field = 'relock_since'
-- The field of a Mutex's hash that says someone may be in the lock's queue
-- (see lock.lua): "1" when there.
local queued_field = 'relock_queued'

-- no_counter fails the script with a WRONGTYPE error: counter, a fencing
-- counter, holds something else than a number (a string that is none, or
-- a key of another type). Every function here fails so before it writes,
-- and every script draws its token before its other writes, since Redis
-- does not undo the writes of a script that fails. A lock's own token
-- key (named) that holds a string that is no number is taken for a
-- missing one; one of another type fails its GET, before any write too.
local function no_counter(counter)
    error({err = 'WRONGTYPE the fencing counter ' .. counter .. ' holds no number'})
end

-- count_up adds n (nil: 1) to counter and returns the sum. A counter that
-- holds no integer fails the script with no_counter's error; any other
-- error (a key of another type, OOM, NOPERM) as the server gives it, the
-- command being run again to raise it.
local function count_up(counter, n)
    local t
    if n then
        t = redis.pcall('incrby', counter, n)
    else
        t = redis.pcall('incr', counter)
    end
    if type(t) == 'table' then
        if string.find(t.err, 'not an integer', 1, true) then
            no_counter(counter)
        end
        if n then
            return redis.call('incrby', counter, n)
        end
        return redis.call('incr', counter)
    end
    return t
end

-- fence returns a new token for a lock the caller is granting; absent is
-- true when the caller has read already that named does not exist.
local function fence(counter, named, absent)
    local n
    if named and not absent then
        n = tonumber(redis.call('get', named))
    end
    if not n then
        local t = count_up(counter)
        if named then
            redis.call('set', named, t)
        end
        return t
    end
    local t = tonumber(redis.call('get', counter) or '0')
    if not t then
        no_counter(counter)
    end
    t = math.max(t, n) + 1
    redis.call('set', counter, t)
    redis.call('set', named, t)
    return t
end

-- latest returns the newest token handed for a lock of counter's slot or
-- for named's lock (0 before any): what a reader is given, since no
-- exclusive hold of the lock that began before the read began has a
-- greater token, and any that begins after it gets a greater one.
local function latest(counter, named)
    local t = tonumber(redis.call('get', counter) or '0')
    if not t then
        no_counter(counter)
    end
    if not named then
        return t
    end
    return math.max(t, tonumber(redis.call('get', named) or '0') or 0)
end

-- held returns the token of the current hold of lock, or, for a hold
-- that has none recorded, the latest token.
local function held(lock, counter, named)
    return tonumber(redis.call('hget', lock, token_field)) or latest(counter, named)
end

-- reserve returns the first of k new tokens (k >= 1) for a lock the
-- caller holds without a break until it hands them out, in order: each is
-- above every token handed before, and the counter (and the named key,
-- where it is kept) moves past the last, so every token handed after by
-- anyone is above them all.
local function reserve(counter, named, k)
    if not named then
        return count_up(counter, k) - k + 1 -- fence's INCR, k at once
    end
    local t = fence(counter, named)
    if k > 1 then
        local last = t + k - 1
        redis.call('set', counter, last)
        redis.call('set', named, last)
    end
    return t
end

-- holding returns the holder's field of lock (the field that is none of
-- token_field, since_field and queued_field) and its token, nil for either
-- it lacks.
local function holding(lock)
    local f = redis.call('hgetall', lock)
    local holder, token
    for i = 1, #f, 2 do
        if f[i] == token_field then
            token = tonumber(f[i + 1])
        elseif f[i] ~= since_field and f[i] ~= queued_field then
            holder = f[i]
        end
    end
    return holder, token
end

-- switched is the answer of a switch that has made its waiter the holder
-- (unlock.lua, rw_write_unlock.lua: "Passing on in process"): 1 when the
-- client may not go on passing the lock (pass false), else 4r + 3, r
-- being the first of k tokens reserved when ask is "1" (0: none).
local function switched(pass, ask, counter, named, k)
    if not pass then
        return 1
    end
    local r = 0
    if ask == '1' then
        r = reserve(counter, named, k)
    end
    return 4 * r + 3
end

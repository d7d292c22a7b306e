-- permit_lib.lua: functions shared by the permit semaphore's scripts, put
-- between each script's header and its body. Not a script of its own.

-- Redis does not undo the writes of a script that fails, so the scripts
-- read first what may fail: the free count (free_count) and the held
-- permits (expired); their writes then cannot fail.

-- free_count returns the number of free permits (0 when the semaphore is
-- not set), or nil when permits holds no integer; a key of another type
-- fails the GET.
local function free_count(permits)
    local v = redis.call('get', permits)
    if v and not string.match(v, '^%-?%d+$') then
        return nil
    end
    return tonumber(v or '0')
end

-- no_count is the error reply of a permits key that holds no integer.
local function no_count(permits)
    return redis.error_reply('WRONGTYPE ' .. permits .. ' holds no number of permits')
end

-- expired returns how many permits of the expiries zset expire at or
-- before now: the ones reclaim gives back.
local function expired(expiries, now)
    return redis.call('zcount', expiries, '-inf', now)
end

-- reclaim removes the n permits whose expiry is at or before now from the
-- expiries zset and adds them back to the free count.
local function reclaim(permits, expiries, now, n)
    if n > 0 then
        redis.call('zremrangebyscore', expiries, '-inf', now)
        redis.call('incrby', permits, n)
    end
end

-- The queue of waiting relock calls of a permit semaphore is a zset of
-- members "<lease ms>|o|<owner>" scored by the server time each joined
-- (see queue.lua). A queued call asks for the permit id permit_id(owner),
-- so that a release can grant it that permit.

-- permit_id returns the permit id of a queued call of owner "<uuid>:<n>":
-- the 16 bytes of the uuid, then n in 8 bytes, big-endian (as the call
-- made it: permitID in permitsemaphore.go); nil for an owner of another
-- form, which relock never queues.
local function permit_id(owner)
    local uuid, n = string.match(owner, '^([%x-]+):(%d+)$')
    if not uuid then
        return nil
    end
    local id = string.gsub(string.gsub(uuid, '-', ''), '..', function(h)
        return string.char(tonumber(h, 16))
    end)
    n = tonumber(n)
    local tail = ''
    for _ = 1, 8 do
        tail = string.char(n % 256) .. tail
        n = math.floor(n / 256)
    end
    return id .. tail
end

-- permit_grant reads, before the caller's first write, what a grant of
-- one free permit of permits (free count), expiries (held permits) to the
-- first call of queued (the queue key's members, a ZRANGE WITHSCORES
-- reply) needs, and returns it for grant_permit; nil when no grant is to
-- be made: no one is queued, or someone that does not queue listens on
-- channel (a Redisson waiter, a relock call still subscribing: the
-- channel has more subscribers than the queue has clients). released is
-- the id of the permit the caller releases, which it no longer holds.
local function permit_grant(permits, expiries, channel, queued, numsub, most, released)
    local first = queued[1]
    if first == nil or redis.call('pubsub', numsub, channel)[2] > clients_in(queued) then
        return nil
    end
    local lease = tonumber(string.match(first, '^(%d+)|o|'))
    local id = permit_id(owner_of(first))
    if not lease or lease == 0 or not id or (id ~= released and redis.call('zscore', expiries, id)) then
        return {first = first} -- taken out of the queue, granted nothing
    end
    now_ms()
    return {first = first, id = id, ttl = math.min(lease, tonumber(most)), life = redis.call('pttl', permits)}
end

-- grant_permit grants the permit g, as permit_grant read it, and reports
-- whether it did: it is held for the call's lease but at most "most" ms
-- until the call renews it, and the call is told on its client's grant
-- channel (see tell_grant).
local function grant_permit(permits, expiries, queue, queued, g, self, prefix, most, publish)
    redis.call('zrem', queue, g.first)
    if not g.id then
        return false
    end
    redis.call('decr', permits)
    redis.call('zadd', expiries, now_ms() + g.ttl, g.id)
    if g.life > 0 then
        redis.call('pexpire', expiries, g.life)
    end
    tell_grant(queued, g.first, 0, g.ttl, publish, prefix, self, most)
    return true
end

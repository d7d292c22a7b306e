-- sem_release.lua: give n permits to a semaphore (Release, AddPermits), or,
-- for a negative n, take them away (AddPermits).
--
-- KEYS[1]   permits (string: the number available)
-- KEYS[2]   request marker of this call, so that a retried request is
--           applied once
-- KEYS[3..] markers of this client's answered requests, deleted
-- ARGV[1]   n, the number of permits to add (negative: to take away)
-- ARGV[2]   "publish" or "spublish"
-- ARGV[3]   request marker lifetime in milliseconds
-- ARGV[4]   channel, told the new number available
-- ARGV[5]   k, 0 < k <= n, the permits of a Release that the releasing
--           client hands to its own waiting calls, if no one else listens
--           on the channel (its client is the only subscriber); may be
--           left out
-- ARGV[6]   with ARGV[5]: "numsub" or "shardnumsub", to count the
--           channel's subscribers
--
-- Returns   the number of permits available after the call (for a
--           retried request: available now). With ARGV[5], twice that
--           number, plus 1 when the k permits were handed (left out of
--           the count: the client gives them to its calls); a retried
--           request answers as the first did.
--           a WRONGTYPE error, with nothing written, when KEYS[1] holds
--           no integer or another type
--
-- Handed permits are never published: the only listener is the client
-- that takes them. The rest, if any, are added and published. Nothing is
-- handed that would leave fewer than none available (a semaphore shrunk
-- while its permits were out): the permits are all added then, and the
-- calls attempt for them as for any.

-- Redis does not undo the writes of a script that fails: nothing is
-- written before what may fail, but the request's marker, which is
-- deleted again if the count cannot take the permits.

local function no_count()
    return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' holds no number of permits')
end

-- forget deletes the markers of the client's answered requests, once
-- nothing can fail any more.
local function forget()
    if #KEYS > 2 then
        redis.call('del', unpack(KEYS, 3))
    end
end

local k = tonumber(ARGV[5] or '0')
-- The marker says how the request was applied: "h" with the k permits
-- handed, "1" without.
local applied, available = '1', nil
if k > 0 and redis.call('pubsub', ARGV[6], ARGV[4])[2] <= 1 then
    available = redis.pcall('get', KEYS[1])
    if type(available) ~= 'table' then
        -- Of another type, the INCRBY below fails.
        available = tonumber(available or '0')
        if not available then
            return no_count()
        end
        if available + tonumber(ARGV[1]) - k >= 0 then
            applied = 'h'
        end
    end
end
local function answer(value)
    if k == 0 then
        return value
    end
    if applied == 'h' then
        return 2 * value + 1
    end
    return 2 * value
end
-- Setting the request's marker tells, in the same command, whether an
-- earlier attempt set it (and so was applied).
if not redis.call('set', KEYS[2], applied, 'px', ARGV[3], 'nx') then
    applied = redis.call('get', KEYS[2])
    local value = tonumber(redis.call('get', KEYS[1]) or '0')
    if not value then
        return no_count()
    end
    forget()
    return answer(value)
end
local add = tonumber(ARGV[1])
if applied == 'h' then
    add = add - k
end
local value
if add == 0 and applied == 'h' then
    value = available -- every permit handed: the count as read above
elseif add == 0 then
    value = redis.pcall('get', KEYS[1])
else
    value = redis.pcall('incrby', KEYS[1], add)
end
local err
if type(value) == 'table' then
    err = value
else
    value = tonumber(value or '0')
    if not value then
        err = no_count()
    end
end
if err then
    -- A key of another type, a count that is no number or one out of
    -- range: nothing stays.
    redis.call('del', KEYS[2])
    if not string.match(err.err, '^WRONGTYPE') then
        local count = redis.call('get', KEYS[1])
        if count and not string.match(count, '^%-?%d+$') then
            err = no_count()
        end
    end
    return err
end
forget()
if add ~= 0 then
    redis.call(ARGV[2], ARGV[4], value)
end
return answer(value)

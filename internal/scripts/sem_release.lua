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
-- ARGV[7]   "1" for a permit semaphore's call (AddPermits, with ARGV[5]
--           and ARGV[6] ""): its held permits are KEYS[2], and the
--           markers follow them (see request.lua); may be left out
--
-- Returns   the number of permits available after the call (for a
--           retried request: available now). With ARGV[5], twice that
--           number, plus 1 when the k permits were handed (left out of
--           the count: the client gives them to its calls); a retried
--           request answers as the first did.
--           a WRONGTYPE error, with nothing written, when KEYS[1] holds
--           no integer or another type, or the held permits of a permit
--           semaphore another type than a zset
--
-- Handed permits are never published: the only listener is the client
-- that takes them. The rest, if any, are added and published. Nothing is
-- handed that would leave fewer than none available (a semaphore shrunk
-- while its permits were out): the permits are all added then, and the
-- calls attempt for them as for any.

-- Redis does not undo the writes of a script that fails: everything that
-- may fail is read first, the count and the held permits included. The
-- request's marker is the first write; the INCRBY after it fails only on
-- a count it would take out of range, and the marker is deleted again
-- then.

local function no_count()
    return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' holds no number of permits')
end

local _, at = held(ARGV[7] == '1')
local marker = KEYS[at]
local available = redis.call('get', KEYS[1])
if available and not string.match(available, '^%-?%d+$') then
    return no_count()
end
available = tonumber(available or '0')

local k = tonumber(ARGV[5] or '0') or 0
-- The marker says how the request was applied: "h" with the k permits
-- handed, "1" without.
local applied = '1'
if k > 0 and redis.call('pubsub', ARGV[6], ARGV[4])[2] <= 1 and available + tonumber(ARGV[1]) - k >= 0 then
    applied = 'h'
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
-- earlier attempt set it (and so was applied); one that sets nothing
-- writes nothing.
if not redis.call('set', marker, applied, 'px', ARGV[3], 'nx') then
    applied = redis.call('get', marker)
    replay(nil, at)
    return answer(available)
end
local add = tonumber(ARGV[1])
if applied == 'h' then
    add = add - k
end
local value = available
if add ~= 0 then
    value = redis.pcall('incrby', KEYS[1], add)
    if type(value) == 'table' then
        redis.call('del', marker) -- out of range, OOM: nothing stays
        return value
    end
end
replay(nil, at)
if add ~= 0 then
    redis.call(ARGV[2], ARGV[4], value)
end
return answer(value)

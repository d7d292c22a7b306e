-- sem_release.lua: give n permits to a semaphore (Release, AddPermits), or,
-- for a negative n, take them away (AddPermits).
--
-- KEYS[1]   permits (string: the number available)
-- KEYS[2]   channel, told the new number available
-- KEYS[3]   request marker of this call, so that a retried request is
--           applied once
-- KEYS[4..] markers of this client's answered requests, deleted
-- ARGV[1]   n, the number of permits to add (negative: to take away)
-- ARGV[2]   "publish" or "spublish"
-- ARGV[3]   request marker lifetime in milliseconds
--
-- Returns   the number of permits available after the call (for a
--           retried request: available now)

if #KEYS > 3 then
    redis.call('del', unpack(KEYS, 4))
end
-- Setting the request's marker tells, in the same command, whether an
-- earlier attempt set it (and so was applied).
if not redis.call('set', KEYS[3], '1', 'px', ARGV[3], 'nx') then
    return tonumber(redis.call('get', KEYS[1]) or '0')
end
local value = redis.pcall('incrby', KEYS[1], ARGV[1])
if type(value) == 'table' and value.err then
    -- A key of another type, or a count out of range: nothing stays.
    redis.call('del', KEYS[3])
    return value
end
redis.call(ARGV[2], KEYS[2], value)
return value

-- sem_drain.lua: take every available permit of a semaphore.
--
-- KEYS[1]   permits (string: the number available)
-- KEYS[2]   request marker of this call, holding the number drained, so
--           that a retried request answers what the first one took
-- KEYS[3..] markers of this client's answered requests, deleted
-- ARGV[1]   request marker lifetime in milliseconds
--
-- Returns   the number of permits taken (0 when none was available; a
--           negative count is left as it is)

if #KEYS > 2 then
    redis.call('del', unpack(KEYS, 3))
end
local done = redis.call('get', KEYS[2])
if done then
    return tonumber(done)
end
local value = tonumber(redis.call('get', KEYS[1]) or '0')
if value <= 0 then
    return 0
end
redis.call('set', KEYS[1], 0, 'keepttl')
redis.call('set', KEYS[2], value, 'px', ARGV[1])
return value

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
--           a WRONGTYPE error, with nothing written, when KEYS[1] holds
--           no integer or another type
--
-- Redis does not undo the writes of a script that fails, so the reads
-- that may fail come before the first write.

local done = redis.call('get', KEYS[2])
local value
if not done then
    value = redis.call('get', KEYS[1])
    if value and not string.match(value, '^%-?%d+$') then
        return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' holds no number of permits')
    end
end
local replayed = replay(done)
if replayed then
    return replayed
end
value = tonumber(value or '0')
if value <= 0 then
    return 0
end
redis.call('set', KEYS[1], 0, 'keepttl')
redis.call('set', KEYS[2], value, 'px', ARGV[1])
return value

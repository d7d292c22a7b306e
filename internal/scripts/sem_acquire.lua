-- sem_acquire.lua: take n permits of a semaphore (Redisson RSemaphore layout).
--
-- KEYS[1]   permits (string: the number available)
-- KEYS[2]   request marker of this call: "1" once it took its permits,
--           "0" once it was undone (sem_undo.lua), so that a retried or
--           late request is never applied twice
-- KEYS[3..] markers of this client's answered requests, deleted
-- ARGV[1]   n, the number of permits to take (positive)
-- ARGV[2]   request marker lifetime in milliseconds
--
-- Returns   1: the permits were taken (now, or by an earlier attempt of
--           this request)
--           0: not enough permits available (or the request was undone)
--           a WRONGTYPE error, with nothing written, when KEYS[1] holds
--           no integer or another type
--
-- Redis does not undo the writes of a script that fails, so the reads
-- that may fail come before the first write.

-- One MGET reads the request's marker and the permits available.
local got = redis.call('mget', KEYS[2], KEYS[1])
local value = got[2]
if not got[1] then
    if not value then
        -- Missing, or of another type, which MGET does not tell: GET fails
        -- on the latter.
        value = redis.call('get', KEYS[1])
    end
    if value and not string.match(value, '^%-?%d+$') then
        return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' holds no number of permits')
    end
end
local replayed = replay(got[1])
if replayed then
    return replayed
end
value = tonumber(value or '0')
if value >= tonumber(ARGV[1]) then
    redis.call('decrby', KEYS[1], ARGV[1])
    redis.call('set', KEYS[2], '1', 'px', ARGV[2])
    return 1
end
return 0

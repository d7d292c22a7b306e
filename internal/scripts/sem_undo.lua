-- sem_undo.lua: undo a semaphore acquisition whose reply was lost.
--
-- KEYS[1]  permits (string)
-- KEYS[2]  request marker of the acquisition
-- ARGV[1]  n, the number of permits the acquisition asked for
-- ARGV[2]  "publish" or "spublish"
-- ARGV[3]  request marker lifetime in milliseconds
-- ARGV[4]  channel, told the new number available
--
-- Returns  1: the acquisition had been applied; its permits are back
--          0: it had not been applied; the marker now says "undone", so
--          that the request, if it still arrives, takes nothing
--          a WRONGTYPE error, with nothing written, when KEYS[1] holds no
--          integer or another type

-- The INCRBY, which fails on a count that holds no integer or another
-- type, is the first write: Redis does not undo the writes of a script
-- that fails.
local done = redis.call('get', KEYS[2])
local value
if done == '1' then
    value = redis.pcall('incrby', KEYS[1], ARGV[1])
    if type(value) == 'table' then
        if string.find(value.err, 'not an integer', 1, true) then
            return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' holds no number of permits')
        end
        return value -- another type, OOM: as the server gave it
    end
end
redis.call('set', KEYS[2], '0', 'px', ARGV[3])
if done ~= '1' then
    return 0
end
redis.call(ARGV[2], ARGV[4], value)
return 1

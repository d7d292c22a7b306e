-- sem_undo.lua: undo a semaphore acquisition whose reply was lost.
--
-- KEYS[1]  permits (string)
-- KEYS[2]  channel, told the new number available
-- KEYS[3]  request marker of the acquisition
-- ARGV[1]  n, the number of permits the acquisition asked for
-- ARGV[2]  "publish" or "spublish"
-- ARGV[3]  request marker lifetime in milliseconds
--
-- Returns  1: the acquisition had been applied; its permits are back
--          0: it had not been applied; the marker now says "undone", so
--          that the request, if it still arrives, takes nothing

local done = redis.call('get', KEYS[3])
redis.call('set', KEYS[3], '0', 'px', ARGV[3])
if done ~= '1' then
    return 0
end
local value = redis.call('incrby', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], value)
return 1

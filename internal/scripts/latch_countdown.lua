-- latch_countdown.lua: count a countdown latch down by one; at zero the
-- key is deleted and "0" published, which releases every awaiter.
--
-- KEYS[1]   count (string)
-- KEYS[2]   request marker of this call, holding its answer, so that a
--           retried request is applied once
-- KEYS[3..] markers of this client's answered requests, deleted
-- ARGV[1]   "publish" or "spublish"
-- ARGV[2]   request marker lifetime in milliseconds
-- ARGV[3]   channel, told "0" when the count reaches zero
--
-- Returns   the count left (0: this call opened the latch), or -1 when the
--           latch was not set (no key, or a count of zero or less)
--           a WRONGTYPE error, with nothing written, when KEYS[1] holds
--           no integer or another type
--
-- Redis does not undo the writes of a script that fails, so the reads
-- that may fail come before the first write.

local done = redis.call('get', KEYS[2])
local count
if not done then
    count = redis.call('get', KEYS[1])
    if count and not string.match(count, '^%-?%d+$') then
        return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' holds no count')
    end
end
local replayed = replay(done)
if replayed then
    return replayed
end
local v = -1
if count then
    v = redis.call('decr', KEYS[1])
    if v <= 0 then
        redis.call('del', KEYS[1])
    end
    if v == 0 then
        redis.call(ARGV[1], ARGV[3], '0')
    end
    if v < 0 then
        v = -1
    end
end
redis.call('set', KEYS[2], v, 'px', ARGV[2])
return v

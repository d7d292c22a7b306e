-- abandon.lua: undo an acquisition whose reply was lost, if it was applied.
--
-- KEYS[1]  lock hash: field <owner> -> hold count
-- KEYS[2]  request marker of the lost acquisition, given with ARGV[4] "1"
--          only
-- ARGV[1]  owner id
-- ARGV[2]  the lock's release channel, told Redisson's release message
--          "0" when the lock becomes free
-- ARGV[3]  "publish" or "spublish"
-- ARGV[4]  "1" when the owner is reentrant: undo only if the request
--          marker shows the acquisition was applied; "0" for a one-shot
--          owner, whose field can only come from that acquisition
--
-- Returns  1 if a hold was undone, 0 if there was nothing to undo.

-- The read comes first: a lock of another type fails the call before it
-- writes (Redis does not undo the writes of a script that fails).
local held = redis.call('hexists', KEYS[1], ARGV[1]) == 1
if ARGV[4] == '1' then
    if redis.call('del', KEYS[2]) == 0 then
        return 0
    end
end
if not held then
    return 0
end
if redis.call('hincrby', KEYS[1], ARGV[1], -1) <= 0 then
    redis.call('del', KEYS[1])
    redis.call(ARGV[3], ARGV[2], '0')
end
return 1

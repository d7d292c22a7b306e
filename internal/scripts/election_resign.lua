-- election_resign.lua: withdraw the leader's record of an election before
-- its lock is released, and log that the term ended.
--
-- KEYS[1]  the election's lock hash (see election_proclaim.lua)
-- KEYS[2]  the election's log
-- ARGV[1]  the holder's owner id "<uuid>:<n>"
-- ARGV[2]  the term that ends
-- ARGV[3]  publish command: "publish" or "spublish"
-- ARGV[4]  the log's lifetime in milliseconds
-- ARGV[5]  the election's channel, told the term that ends
--
-- Returns  1 when the record was withdrawn, 0 when the caller does not
--          hold the lock (its hold ended).

if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
    return 0
end
local record = '{"since":' .. now_ms() .. ',"term":' .. ARGV[2] .. ',"holder":""}'
-- The log first: a log key of another type fails the call before it
-- writes (the HDEL of a hash just read cannot fail).
redis.call('xadd', KEYS[2], 'maxlen', '~', 128, '*', 'r', record)
redis.call('hdel', KEYS[1], 'relock_leader', 'relock_leader_holder')
redis.call('pexpire', KEYS[2], ARGV[4])
redis.call(ARGV[3], ARGV[5], ARGV[2])
return 1

-- election_proclaim.lua: publish the value of an election's leader, for a
-- new term (Campaign) or a new value in the same term (Proclaim), if the
-- caller still holds the election's lock.
--
-- KEYS[1]  the election's lock hash (a Mutex's, see lock.lua); this
--          script keeps the leader's record in its fields relock_leader and
--          relock_leader_holder
-- KEYS[2]  the election's log: a stream of records, newest last, trimmed
--          to about 128 entries, that expires ARGV[5] ms after its last one
-- ARGV[1]  the holder's owner id "<uuid>:<n>" (its field in KEYS[1])
-- ARGV[2]  the record without its start: a JSON object whose text begins
--          with '{' and does not name "since"
-- ARGV[3]  "1" for a new term, "0" for a new value of the same term
-- ARGV[4]  publish command: "publish" or "spublish"
-- ARGV[5]  the log's lifetime in milliseconds
-- ARGV[6]  the term, published on ARGV[7]
-- ARGV[7]  the election's channel, told the term of every change
--
-- Returns  1 when the record was written, 0 when the caller does not hold
--          the lock (its hold ended).

if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
    return 0
end
local since
if ARGV[3] == '0' then
    local old = redis.call('hget', KEYS[1], 'relock_leader')
    if old then
        since = string.match(old, '^{"since":(%d+),')
    end
end
since = since or tostring(now_ms())
local record = '{"since":' .. since .. ',' .. string.sub(ARGV[2], 2)
-- The log first: a log key of another type fails the call before it
-- writes (the HSET of a hash just read cannot fail).
redis.call('xadd', KEYS[2], 'maxlen', '~', 128, '*', 'r', record)
redis.call('hset', KEYS[1], 'relock_leader', record, 'relock_leader_holder', ARGV[1])
redis.call('pexpire', KEYS[2], ARGV[5])
redis.call(ARGV[4], ARGV[7], ARGV[6])
return 1

-- election_read.lua: read an election's leader, and the log entries after
-- one an observer has seen.
--
-- KEYS[1]  the election's lock hash (see election_proclaim.lua)
-- KEYS[2]  the election's log
-- ARGV[1]  the id of the last log entry the caller has seen, or "" to
--          read no entry
-- ARGV[2]  the most entries to return
--
-- Returns  {record, pttl, last, id1, record1, id2, record2, ...}: record
--          is the leader's record, or false when there is no leader (no
--          lock, or its holder has not published a record); pttl is the
--          lock's PTTL; last is the id of the log's newest entry ("" when
--          there is no log); then up to ARGV[2] entries after ARGV[1],
--          oldest first (those left in the log: an observer that fell more
--          than the log's length behind misses the oldest).

local out = {false, redis.call('pttl', KEYS[1]), ''}
local holder = redis.call('hget', KEYS[1], 'relock_leader_holder')
if holder and redis.call('hexists', KEYS[1], holder) == 1 then
    out[1] = redis.call('hget', KEYS[1], 'relock_leader')
end
local newest = redis.call('xrevrange', KEYS[2], '+', '-', 'count', '1')
if #newest > 0 then
    out[3] = newest[1][1]
end
if ARGV[1] == '' then
    return out
end
local n = tonumber(ARGV[2])
local entries = redis.call('xrange', KEYS[2], ARGV[1], '+', 'count', n + 1)
for _, e in ipairs(entries) do
    if e[1] ~= ARGV[1] and #out < 3 + 2 * n then
        out[#out + 1] = e[1]
        out[#out + 1] = e[2][2]
    end
end
return out

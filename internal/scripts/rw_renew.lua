-- rw_renew.lua: renew or check many read holds in one call (keys of one
-- slot). A reader's holds are the hash field <owner> -> count and one key
-- per hold, string.format(holds, owner, i) for i = 1..count, holds being
-- the rule of the lock's reader hold keys (see rw_read_lock.lua).
--
-- KEYS[i]      lock hash of hold i (n KEYS)
-- ARGV[2i-1]   owner id of hold i
-- ARGV[2i]     new lease in milliseconds for hold i; "0" checks the hold
--              without extending it
-- ARGV[2n+i]   the rule of the reader hold keys of hold i's lock
--
-- The reader hold keys it touches are not among its KEYS: which exist
-- depends on the hold counts in the hashes, which only the script reads.
-- Every one of them is in its lock's slot, as the rule puts it there, and
-- the keys of one call are of one slot. (Redisson renews them the same
-- way.)
--
-- Returns      a table: element i is 1 if owner i still holds the read
--              lock (its field is there and at least one of its hold keys
--              is alive), else 0. With a lease, its live hold keys and the
--              hash now live at least that long. Only owner i's own hold
--              keys are renewed: other readers' holds expire on their own.
--              A key of another type is a hold gone (0), as in renew.lua.

local held = {}
for i = 1, #KEYS do
    local key, owner, lease, holds = KEYS[i], ARGV[2 * i - 1], tonumber(ARGV[2 * i]), ARGV[2 * #KEYS + i]
    held[i] = 0
    local count = redis.pcall('hget', key, owner)
    if type(count) == 'table' and not string.find(count.err, 'WRONGTYPE', 1, true) then
        redis.call('hget', key, owner) -- raises it as the server gives it
    end
    count = tonumber(count) -- nil for another type
    if count ~= nil then
        for j = 1, count do
            local hold = string.format(holds, owner, j)
            local ttl = redis.call('pttl', hold)
            if ttl ~= -2 then
                held[i] = 1
                if lease > 0 and ttl >= 0 and ttl < lease then
                    redis.call('pexpire', hold, lease)
                end
            end
        end
        if held[i] == 1 and lease > 0 and redis.call('pttl', key) < lease then
            redis.call('pexpire', key, lease)
        end
    end
end
return held

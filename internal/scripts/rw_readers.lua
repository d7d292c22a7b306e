-- rw_readers.lua: the read holds a read-write lock has left, for the
-- scripts that release a hold of it; put between each script's header and
-- its body. Not a script of its own.

-- longest_reader returns the longest TTL among the read holds left in the
-- lock hash key (0 when none is), whose hold keys are
-- "<prefix>:<owner>:rwlock_timeout:<i>", and deletes the field of each
-- reader whose holds have all expired.
local function longest_reader(key, prefix)
    local longest = 0
    local fields = redis.call('hgetall', key)
    for i = 1, #fields, 2 do
        local n = tonumber(fields[i + 1])
        if n ~= nil and fields[i] ~= 'mode' then
            local alive = 0
            for j = 1, n do
                alive = math.max(alive, redis.call('pttl', prefix .. ':' .. fields[i] .. ':rwlock_timeout:' .. j))
            end
            if alive > 0 then
                longest = math.max(longest, alive)
            else
                redis.call('hdel', key, fields[i])
            end
        end
    end
    return longest
end

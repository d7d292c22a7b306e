-- rw_readers.lua: the read holds a read-write lock has left, for the
-- scripts that release a hold of it; put between each script's header and
-- its body. Not a script of its own.

-- readers_left returns the longest TTL among the read holds a lock hash
-- has left (0 when none is alive), fields being its HGETALL reply and
-- prefix the start of its hold keys "<prefix>:<owner>:rwlock_timeout:<i>",
-- and the reader fields whose holds have all expired (dead readers, whose
-- fields the caller deletes). The hold owner:rwlock_timeout:gone (owner
-- may be nil) is taken as released already, so that owner has gone - 1
-- holds left (with none left it is skipped: the caller deletes its field
-- with the hold). It only reads, so that a release reads all it needs
-- before its first write: Redis does not undo the writes of a script that
-- fails. The fields that are no reader's are skipped: mode, the write
-- hold's token and "<owner>:write".
local function readers_left(fields, prefix, owner, gone)
    local longest, dead = 0, {}
    for i = 1, #fields, 2 do
        local f = fields[i]
        local n = tonumber(fields[i + 1])
        if f == owner then
            n = gone - 1
            if n == 0 then
                n = nil
            end
        end
        if n ~= nil and f ~= 'mode' and f ~= token_field and string.sub(f, -6) ~= ':write' then
            local alive = 0
            for j = 1, n do
                alive = math.max(alive, redis.call('pttl', prefix .. ':' .. f .. ':rwlock_timeout:' .. j))
            end
            if alive > 0 then
                longest = math.max(longest, alive)
            else
                dead[#dead + 1] = f
            end
        end
    end
    return longest, dead
end

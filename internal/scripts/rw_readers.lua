-- rw_readers.lua: the read holds of a read-write lock, for the scripts
-- that release a hold of it or delete it; put between each script's
-- header and its body. Not a script of its own.

-- A reader's holds are its field of the lock hash, <owner> -> count, and
-- one key per hold, string.format(holds, owner, i) for i = 1..count, holds
-- being the rule of the lock's reader hold keys that its caller passes
-- (Redisson's layout: see ReaderHolds in internal/layout).

-- is_reader reports whether field f of a lock hash, whose value is n
-- (tonumber of it), is a reader's hold count: the fields that are no
-- reader's are mode, the write hold's token and "<owner>:write".
local function is_reader(f, n)
    return n ~= nil and f ~= 'mode' and f ~= token_field and string.sub(f, -6) ~= ':write'
end

-- readers_left returns the longest TTL among the read holds a lock hash
-- has left (0 when none is alive), fields being its HGETALL reply and
-- holds the rule of its hold keys, and the reader fields whose holds have
-- all expired (dead readers, whose fields the caller deletes). Hold gone
-- of owner (owner may be nil) is taken as released already, so that owner
-- has gone - 1 holds left (with none left it is skipped: the caller
-- deletes its field with the hold). It only reads, so that a release
-- reads all it needs before its first write: Redis does not undo the
-- writes of a script that fails.
local function readers_left(fields, holds, owner, gone)
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
        if is_reader(f, n) then
            local alive = 0
            for j = 1, n do
                alive = math.max(alive, redis.call('pttl', string.format(holds, f, j)))
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

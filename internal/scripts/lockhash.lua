-- lockhash.lua: what a lock's hash holds. The force unlocks delete a hash
-- only when it holds nothing but what a lock writes, so that no call of a
-- lock ever deletes an application's hash; an acquisition that finds a
-- hash with no TTL held by others (every lock has a TTL) fails on one that
-- no lock wrote instead of waiting for it for ever. It is not a script of
-- its own: loading puts it between a script's header and its body.
--
-- A lock's hash holds owner fields "<uuid>:<n>" (relock's and Redisson's
-- owner ids) with a hold count, relock's own fields (fence.lua, and an
-- election's leader record), and for a read-write lock the field mode,
-- "read" or "write", and its writer's field "<uuid>:<n>:write".

-- OWNER matches an owner id and captures its client's "<uuid>".
local OWNER = '^(%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x):%d+$'

-- not_a_lock fails the script with a WRONGTYPE error: key is no lock of
-- the caller's kind. The callers call it before their first write.
local function not_a_lock(key, why)
    error({err = 'WRONGTYPE ' .. key .. ' is not a lock: ' .. why})
end

-- lock_clients reads the hash key as a lock's (rw: a read-write lock's)
-- and returns its fields (an HGETALL reply) and the "<uuid>" of each
-- client that holds it, once each. A hash that holds anything else, or
-- no holder, fails the script (not_a_lock); it only reads.
local function lock_clients(key, rw)
    local fields = redis.call('hgetall', key)
    local clients, seen = {}, {}
    local mode = false
    for i = 1, #fields, 2 do
        local f, v = fields[i], fields[i + 1]
        if rw and f == 'mode' then
            mode = v
        elseif f ~= token_field and f ~= since_field and f ~= queued_field
            and f ~= 'relock_leader' and f ~= 'relock_leader_holder' then
            local owner = f
            if rw then
                owner = string.match(f, '^(.*):write$') or f
            end
            local c = string.match(owner, OWNER)
            if not c or not string.match(v, '^[1-9]%d*$') then
                not_a_lock(key, 'field ' .. f)
            end
            if not seen[c] then
                seen[c] = true
                clients[#clients + 1] = c
            end
        end
    end
    if rw and mode ~= 'read' and mode ~= 'write' then
        not_a_lock(key, 'no read-write mode')
    end
    if #clients == 0 then
        -- A lock's hash lives only while someone holds it.
        not_a_lock(key, 'no holder')
    end
    return fields, clients
end

-- tell_holders asks each of clients (from lock_clients) to check its holds
-- of the lock key now, "h:<key>" on the channel channel_of(c): a relock
-- client that listens there renews its holds of the lock at once and so
-- hears that they are gone; any other hears nothing.
local function tell_holders(clients, publish, key, channel_of)
    for _, c in ipairs(clients) do
        redis.call(publish, channel_of(c), 'h:' .. key)
    end
end

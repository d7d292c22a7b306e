-- queue.lua: the functions of the scripts that read a Mutex's queue of
-- waiters (see lock.lua and unlock.lua). It is not a script of its own:
-- loading puts it between a script's header and its body. A member is
-- "<lease ms>|<kind>|<owner>", and an owner "<uuid>:<n>".

-- client returns the "<uuid>" of a member's owner.
local function client(member)
    return string.match(member, '^%d+|%a|(.*):%d+$')
end

-- owner_of returns a member's owner.
local function owner_of(member)
    return string.match(member, '^%d+|%a|(.*)$')
end

-- grant_channel returns the grant channel of client c, given the channel
-- prefix of client self: prefix with self's "<uuid>" replaced by c's.
local function grant_channel(prefix, self, c)
    local at = string.find(prefix, self, 1, true)
    return string.sub(prefix, 1, at - 1) .. c .. string.sub(prefix, at + #self)
end

-- wake_clients tells the first waiter of each client in queue, a ZRANGE
-- WITHSCORES reply, to check again now on its grant channel: the lock was
-- freed without a grant.
local function wake_clients(queue, publish, prefix, self)
    local told = {}
    for i = 1, #queue, 2 do
        local c = client(queue[i])
        if c and not told[c] then
            told[c] = true
            redis.call(publish, grant_channel(prefix, self, c), 'n:0:' .. owner_of(queue[i]))
        end
    end
end

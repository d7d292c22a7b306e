-- fair_pass.lua: make a fair lock's hold, passed on in process by the
-- client that holds it, so in Redis (see pass.go and "Passing on in
-- process" in unlock.lua): the client's hold, of an older token, becomes
-- the grantee's, which leaves the queue. The grantee was among the
-- queue's next heads, all waiters of the client, that an earlier answer
-- named; the client has held the lock since, passing it to them in
-- order. Switches may reach the server in any order: the newest token
-- wins, and an older switch that comes later only takes its grantee out of
-- the queue.
--
-- KEYS[1..4]  as in fair_queue.lua
-- KEYS[5]  fencing counter of the lock's slot (see fence.lua)
-- KEYS[6]  guard (see fair_queue.lua)
-- KEYS[7]  the lock's own token key (see fence.lua), given with fencing
--          mode "0" only
-- ARGV[1]  the grantee's owner id "<uuid>:<n>"
-- ARGV[2]  its lease in milliseconds
-- ARGV[3]  its fencing token t, reserved for it by an earlier answer
-- ARGV[4]  k: how many of the queue's next heads to name, at most
-- ARGV[5]  the client's clock in unix ms when it passed the lock,
--          recorded as relock_since (absent or "": the server's clock, one
--          more call)
-- ARGV[6]  fencing mode (see fence.lua): "0" when KEYS[7] is the lock's
--          own token key, "1" when the call has none
--
-- Returns  {0}: the client holds the lock no more (its hold expired or was
--          deleted before): nothing is done but the grantee's leaving
--          {2, c}: a hold of the client with the newer token c is there
--          (its switch came first): nothing is done but the grantee's
--          leaving
--          {1, h, r}: the grantee holds the lock with token t; h and r as
--          in fair_unlock.lua's reply

local t = tonumber(ARGV[3])
-- Everything that can fail is read, and the tokens reserved, before the
-- first write: the hold, the budgets (for take), the queue's first
-- members, and, when the grantee is not the head, its place.
local holder, cur = holding(KEYS[1])
local self = string.match(ARGV[1], '^(.*):%d+$')
local status = 1
if not cur or not holder or string.match(holder, '^(.*):%d+$') ~= self
    or (cur == t and holder ~= ARGV[1]) then
    status = 0
elseif cur > t then
    status = 2
end
local rest = budgets()
-- The grantee is the head but when an older switch comes after a newer
-- one. The first k + 1 members of the queue give the head, the next heads
-- after the grantee, and whether anyone is behind the head.
local k = status == 1 and tonumber(ARGV[4]) or 0
local list = redis.call('lrange', KEYS[2], 0, math.max(k, 1))
local head = list[1]
local heads, at, behind, others = {}
if k > 0 then
    local next = {}
    for _, o in ipairs(list) do
        if o ~= ARGV[1] and #next < k then
            next[#next + 1] = o
        end
    end
    heads = pass_to(ARGV[1], next)
end
if head ~= ARGV[1] then
    at, behind, others = place(ARGV[1])
end
local since
if status == 1 and cur < t then
    since = at_or_now(ARGV[5])
end

-- The writes: the tokens reserved first (reserve fails, if it does,
-- before it writes).
local first = reserved(heads, ARGV[6] == '0' and KEYS[7] or nil)
if head == ARGV[1] then
    take(ARGV[1], rest, list[2] ~= nil)
else
    leave(ARGV[1], at, behind, others)
end
if status == 0 then
    return {0}
end
if status == 2 then
    return {2, cur}
end
if cur < t then -- else a retry of this switch, applied already
    redis.call('del', KEYS[1])
    redis.call('hset', KEYS[1], ARGV[1], '1', token_field, t, since_field, since)
    redis.call('pexpire', KEYS[1], ARGV[2])
end
return {1, heads, first}

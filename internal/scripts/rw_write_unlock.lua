-- rw_write_unlock.lua: release one write hold of a read-write lock, or
-- undo a write acquisition whose reply was lost.
--
-- KEYS[1]  lock hash (see rw_read_lock.lua)
-- KEYS[2..5]  as in rw_queue.lua (KEYS[5] with fencing mode "0" only)
-- KEYS[#KEYS]  marker, last, as in rw_release.lua
-- ARGV[1]  writer field "<owner>:write"
-- ARGV[2]  the lock's release channel, told "1" (Redisson's message
--          for the end of a write lock) when the write lock ends
-- ARGV[3]  "publish" or "spublish"
-- ARGV[4..5]  the marker's, as in rw_release.lua
-- ARGV[6]  the rule of the lock's reader hold keys (see rw_read_lock.lua)
-- ARGV[7..14]  the grant's (see rw_queue.lua)
-- ARGV[15] a fencing token: the releasing client has passed its write hold
--          to its writer ARGV[14] in process already, with that token (see
--          "Passing on in process" below); absent or "" for a release
-- ARGV[16] with ARGV[15]: "1" to reserve the next k tokens
--
-- Returns  0: the owner holds no write hold here
--          1: one hold released; the lock is still held: by this owner's
--             other write holds, or, after its last write hold, by its
--             read holds (downgrade: the lock turns to read mode)
--          2: the last hold released, the lock is free
--          3: the last hold released, and the lock granted to the first
--             waiting writer (see rw_queue.lua)
--          a negative integer -(2t + p): the last hold released, and the
--             lock handed to the releasing client's writer ARGV[14], with
--             fencing token t; p is 1 when the tokens t + 1 to t + k are
--             reserved for passing it on in process (rw_queue.lua)
--          With ARGV[15] (passing on in process), t being that token:
--          0  the client holds the lock no more: the run of holds was
--             broken before (expired, deleted, or not a write lock of the
--             client), and the writer has nothing
--          4c + 2: a write hold of the client with the newer token c is
--             there already (its switch overtook this one): nothing done
--          4r + 2p + 1: the writer holds the lock with token t; p is 1 when
--             the client may go on passing it in process (may_pass in
--             rw_queue.lua), and r, when not 0, the first of k tokens
--             reserved for that
--
-- When the last write hold goes, the message is published whether the lock
-- is free or turned to read mode: either way waiting readers may enter;
-- unless the lock, free, is granted to the next writer (rw_queue.lua).
-- Writers that may not listen are told on their grant channels then
-- (announce in rw_queue.lua).
--
-- Passing on in process, as unlock.lua's for a reentrant lock: while a
-- client holds the write lock on tokens a hand reserved for it, its
-- release may hand the lock to its next writer at once and send this
-- script with ARGV[15] to make it so here. Each switch replaces the
-- client's write hold if that hold's token is older than its own, so the
-- newest wins whatever the order they arrive in, and none takes a lock
-- the client does not hold in write mode.

-- pass_on makes the writer ARGV[14] the holder with token t (see above)
-- and returns the reply. Everything that may fail comes before its first
-- write (see rw_queue.lua).
local function pass_on(t)
    local lease, owner = string.match(ARGV[14], '^(%d+)|[oO]|(.*)$')
    local o, O = lease .. '|o|' .. owner, lease .. '|O|' .. owner
    local fields = redis.call('hgetall', KEYS[1])
    local holder, cur, mode
    for i = 1, #fields, 2 do
        local f = fields[i]
        if f == 'mode' then
            mode = fields[i + 1]
        elseif f == token_field then
            cur = tonumber(fields[i + 1])
        elseif string.sub(f, -6) == ':write' then
            holder = f
        end
    end
    if mode ~= 'write' or not cur or not holder or string.sub(holder, 1, #ARGV[8] + 1) ~= ARGV[8] .. ':' then
        redis.call('zrem', KEYS[3], o, O)
        return 0
    end
    if cur > t then
        redis.call('zrem', KEYS[3], o, O)
        return 4 * cur + 2
    end
    local subs = redis.call('pubsub', ARGV[7], ARGV[2])[2]
    local reply = switched(may_pass(without(waiting(KEYS[3]), o, O), subs), ARGV[16], KEYS[2], token_key, k)
    redis.call('zrem', KEYS[3], o, O)
    redis.call('hdel', KEYS[1], holder)
    redis.call('hset', KEYS[1], owner .. ':write', '1', token_field, t)
    redis.call('pexpire', KEYS[1], lease)
    return reply
end

if ARGV[15] and ARGV[15] ~= '' then
    return pass_on(tonumber(ARGV[15]))
end
-- Everything that may fail is read first (see rw_release.lua). The one
-- HGETALL of the hash gives the writer's count, the mode, and whether the
-- hash has read holds (numeric fields of other owners).
local fields, reply = release_read()
if not fields then
    return reply
end
local count, mode, readers = nil, nil, false
for i = 1, #fields, 2 do
    local f = fields[i]
    if f == ARGV[1] then
        count = tonumber(fields[i + 1])
    elseif f == 'mode' then
        mode = fields[i + 1]
    elseif f ~= token_field and tonumber(fields[i + 1]) then
        readers = true
    end
end
if count == nil or mode ~= 'write' then
    releasing()
    return 0
end
-- Read holds left (the writer's own) keep the lock in read mode, for as
-- long as the longest of them.
local longest, dead, queue, grantee, token, subs = 0, {}
if count == 1 and readers then
    longest, dead = readers_left(fields, ARGV[6])
end
if count == 1 then
    if longest > 0 then
        queue = queued()
    else
        queue, grantee, token, subs = freeing()
    end
end

-- The writes.
releasing()
local result = 1
if count > 1 then
    redis.call('hincrby', KEYS[1], ARGV[1], -1)
elseif longest > 0 then
    redis.call('hdel', KEYS[1], ARGV[1], token_field, unpack(dead))
    redis.call('hset', KEYS[1], 'mode', 'read')
    redis.call('pexpire', KEYS[1], longest)
    announce('1', queue)
else
    result = free(queue, grantee, token, subs, '1')
end
return released(result)

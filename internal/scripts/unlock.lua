-- unlock.lua: release one hold of a reentrant lock, or leave its queue;
-- when that frees the lock, grant it to the first waiter of the queue.
--
-- KEYS[1]  lock hash: field <owner> -> hold count
-- KEYS[2]  release channel
-- KEYS[3]  release marker for this request, read and written only when
--          ARGV[4] is "1", so that a retried release of a reentrant hold is
--          applied once
-- KEYS[4]  fencing counter of the lock's slot (see fence.lua)
-- KEYS[5]  the lock's own token key (see fence.lua)
-- KEYS[6]  queue of waiters (see lock.lua): members "<lease ms>|<kind>|<owner>",
--          kind "o" for a one-shot owner, "r" for a reentrant one, "w" for
--          one whose Client waits for replicas to acknowledge its grants
-- ARGV[1]  owner id releasing
-- ARGV[2]  release message published when the lock becomes free
-- ARGV[3]  "publish" or "spublish"
-- ARGV[4]  "1" to use the release marker, "0" not to
-- ARGV[5]  release marker lifetime in milliseconds
-- ARGV[6]  fencing mode (see fence.lua)
-- ARGV[7]  "numsub" or "shardnumsub", to count the channel's subscribers
-- ARGV[8]  the releasing client's "<uuid>"
-- ARGV[9]  "1" when the releasing client listens on the channel itself
-- ARGV[10] queue member of a waiter of the releasing client to grant the
--          lock to in place of the first one when that is the releasing
--          client's too; "" for none
-- ARGV[11] grant channel of the releasing client: the channel of another
--          client is this with the client's "<uuid>" replaced
-- ARGV[12] the longest, in milliseconds, a grant to another client holds
--          the lock before its waiter has renewed it
-- ARGV[13] queue member to remove first (a waiter leaving); "" for none
-- ARGV[14] "1" to grant to other clients' waiters, "0" to the releasing
--          client's own only
-- ARGV[15] a fencing token, or "": with a token, the releasing client has
--          passed its hold to its waiter ARGV[10] in process already,
--          with that token (see "Passing on in process" below)
-- ARGV[16] how many tokens to reserve for passing on in process (k)
-- ARGV[17] with ARGV[15]: "1" to reserve the next k tokens, "0" not to
--
-- Returns  0: the owner holds no hold here (expired, deleted or never held)
--          1: one hold released, the owner still holds the lock
--          2: the last hold released, the lock is free
--          3: the last hold released, and the lock granted to a waiter of
--             another client, told on its grant channel
--          a negative integer -(2t + p): the last hold released, and the
--             lock granted to the member ARGV[10], whose fencing token is
--             t; p is 1 when the tokens t + 1 to t + k are reserved for
--             the grantee's client to pass the lock on in process.
--          With ARGV[15] (passing on in process), t being that token:
--          0  the client holds the lock no more: the run of holds was
--             broken before (expired, deleted), and the waiter has nothing
--          4c + 2: a hold of the client with the newer token c is there
--             already (its switch overtook this one): nothing done
--          4r + 2p + 1: the waiter holds the lock with token t; p is 1 when
--             the client may go on passing it in process, and r, when not
--             0, the first of k tokens reserved for that
--
-- Passing on in process. A release that grants the lock to a waiter of
-- its own client reserves k fencing tokens for it when no one else could
-- be owed the lock: no one else listens on the release channel and no
-- other client's waiter is first in the queue. While its client holds the
-- lock without a break, a release of that client may then hand the lock
-- to its next local waiter at once, with the next reserved token, and
-- send this script with ARGV[15] to make it so in Redis. Such switches
-- may reach the server in any order; each replaces the client's hold if
-- that hold's token is older than its own, so the newest wins, and none
-- ever takes a lock the client does not hold. A switch answered with p
-- reserves the next k tokens when asked to; one answered without p ends
-- the passing: the next release frees or grants the lock as below.
-- Tokens still grow with every holder: the reserved ones are above every
-- token handed before them, every token handed after them by anyone
-- comes from the counter past them, and no one else gets a token for the
-- lock while the client holds it.
--
-- A grant goes to the first waiter of the queue unless someone else
-- listens on the release channel (a Redisson client, an older relock, a
-- relock call that waited for a holder that was not relock): then the
-- lock is freed and announced as it always was, so that no client that
-- does not queue is starved. A grant to another client's waiter holds the lock
-- for at most ARGV[12] until that waiter renews it (see tell_grant for a
-- waiter that has died). Only
-- kind "o" is granted by another client: when another kind is first, the
-- lock is freed and announced, and its waiter tries for itself. Waiters
-- listen on the release channel only while a holder that is not relock
-- may publish there; so when the lock is freed, the first waiter of each
-- client in the queue is also told on its client's grant channel to check
-- again now ("n:0:<owner>").

local passed = ARGV[15] or ''

-- The common call, a plain release of the owner's last hold with no one
-- in the queue, frees the lock here, before any of the functions below is
-- made. Whatever it reads on the way is kept for the rest of the script:
-- count, the owner's hold count, and queued, whether the queue exists.
local count, queued
if passed == '' and ARGV[13] == '' and ARGV[4] ~= '1' then
    count = tonumber(redis.call('hget', KEYS[1], ARGV[1]))
    if count == nil then
        return 0
    end
    if count == 1 then
        queued = redis.call('exists', KEYS[6]) == 1
        if not queued and ARGV[10] == '' then
            redis.call('del', KEYS[1])
            redis.call(ARGV[3], KEYS[2], ARGV[2])
            return 2
        end
    end
end

-- @library
local k = tonumber(ARGV[16] or '0')

-- may_pass reports whether the client may pass the lock on in process
-- once it holds it (see above), next being the first member of the queue
-- after its holder's (nil for none), and quiet whether no one else listens
-- on the release channel.
local function may_pass(next, quiet)
    return quiet and ARGV[14] == '1' and k > 0 and (not next or client(next) == ARGV[8])
end

-- quiet_channel reports whether no one but the releasing client (when it
-- listens) listens on the release channel.
local function quiet_channel()
    local known = 0
    if ARGV[9] == '1' then
        known = 1
    end
    return redis.call('pubsub', ARGV[7], KEYS[2])[2] <= known
end

if passed ~= '' then
    local t = tonumber(passed)
    local holder, cur = holding(KEYS[1])
    redis.call('zrem', KEYS[6], ARGV[10])
    if not cur or not holder or string.sub(holder, 1, #ARGV[8] + 1) ~= ARGV[8] .. ':' then
        return 0
    end
    if cur > t then
        return 4 * cur + 2
    end
    redis.call('del', KEYS[1])
    redis.call('hset', KEYS[1], owner_of(ARGV[10]), 1, token_field, t, since_field, now_ms())
    redis.call('pexpire', KEYS[1], string.match(ARGV[10], '^(%d+)|'))
    if not may_pass(redis.call('zrange', KEYS[6], 0, 0)[1], quiet_channel()) then
        return 1
    end
    local r = 0
    if ARGV[17] == '1' then
        r = reserve(KEYS[4], KEYS[5], ARGV[6], k)
    end
    return 4 * r + 3
end

if ARGV[13] ~= '' then
    redis.call('zrem', KEYS[6], ARGV[13])
    if redis.call('type', KEYS[1]).ok ~= 'hash' then
        return 0 -- nothing to release, whatever the key holds
    end
end
if ARGV[4] == '1' then
    local done = redis.call('get', KEYS[3])
    if done then
        return tonumber(done)
    end
end
if not count then
    count = tonumber(redis.call('hget', KEYS[1], ARGV[1]))
    if count == nil then
        return 0
    end
end
if count > 1 then
    redis.call('hincrby', KEYS[1], ARGV[1], -1)
    if ARGV[4] == '1' then
        redis.call('set', KEYS[3], 1, 'px', ARGV[5])
    end
    return 1
end

local result = 2
local grantee
local quiet = false
local queue = waiting(KEYS[6], queued)
if #queue > 0 or ARGV[10] ~= '' then
    quiet = quiet_channel()
    if quiet then
        local first = queue[1]
        if first == nil or (client(first) == ARGV[8] and ARGV[10] ~= '') then
            grantee = ARGV[10]
            if first ~= nil and not redis.call('zscore', KEYS[6], grantee) then
                grantee = first
            end
        elseif ARGV[14] == '1' then
            grantee = first
        end
    end
end
if grantee and grantee ~= ARGV[10] and not string.match(grantee, '^%d+|o|') then
    grantee = nil -- a reentrant owner, or one that must see replicas acknowledge
end

redis.call('del', KEYS[1])
if grantee then
    local lease = string.match(grantee, '^(%d+)|')
    local owner = owner_of(grantee)
    local mine = client(grantee) == ARGV[8]
    local ttl = tonumber(lease)
    if not mine then
        ttl = math.min(ttl, tonumber(ARGV[12]))
    end
    redis.call('zrem', KEYS[6], grantee)
    local token = fence(KEYS[4], KEYS[5], ARGV[6])
    redis.call('hset', KEYS[1], owner, 1, token_field, token, since_field, now_ms())
    redis.call('pexpire', KEYS[1], ttl)
    if mine and grantee == ARGV[10] then
        result = -2 * token
        local after
        for i = 1, #queue, 2 do
            if queue[i] ~= grantee then
                after = queue[i]
                break
            end
        end
        if may_pass(after, quiet) then
            reserve(KEYS[4], KEYS[5], ARGV[6], k)
            result = result - 1
        end
    else
        tell_grant(queue, grantee, token, ttl, ARGV[3], ARGV[11], ARGV[8], ARGV[12])
        result = 3
    end
else
    redis.call(ARGV[3], KEYS[2], ARGV[2])
    wake_clients(queue, ARGV[3], ARGV[11], ARGV[8])
end
if ARGV[4] == '1' then
    redis.call('set', KEYS[3], result, 'px', ARGV[5])
end
return result

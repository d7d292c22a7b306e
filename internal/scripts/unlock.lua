-- unlock.lua: release one hold of a reentrant lock, or leave its queue;
-- when that frees the lock, grant it to the first waiter of the queue.
--
-- KEYS[1]  lock hash: field <owner> -> hold count
-- KEYS[2]  fencing counter of the lock's slot (see fence.lua)
-- KEYS[3]  queue of waiters (see lock.lua): members "<lease ms>|<kind>|<owner>",
--          kind "o" for a one-shot owner, "r" for a reentrant one, "w" for
--          one whose Client waits for replicas to acknowledge its grants
-- KEYS[4]  the lock's own token key (see fence.lua), given with fencing
--          mode "0" only
-- KEYS[#KEYS]  release marker for this request, last, given for a
--          reentrant owner (with ARGV[12]) and only for one, so that a
--          retried release of a reentrant hold is applied once
-- ARGV[1]  owner id releasing
-- ARGV[2]  "publish" or "spublish" (and so "numsub" or "shardnumsub" to
--          count a channel's subscribers)
-- ARGV[3]  fencing mode (see fence.lua): "0" when KEYS[4] is the lock's
--          own token key, "1" when the call has none
-- ARGV[4]  grant channel of the releasing client, which ends with its
--          "<uuid>": the channel of another client is this with the
--          client's "<uuid>" replaced
-- ARGV[5]  "1" to grant to other clients' waiters, "0" to the releasing
--          client's own only
-- ARGV[6]  the lock's release channel
-- The arguments from here on may be left out when they are "" or "0":
-- ARGV[7]  "1" when the releasing client listens on the channel itself
-- ARGV[8]  queue member of a waiter of the releasing client to grant the
--          lock to in place of the first one when that is the releasing
--          client's too
-- ARGV[9]  queue member to remove (a waiter leaving)
-- ARGV[10] a fencing token: the releasing client has passed its hold to
--          its waiter ARGV[8] in process already, with that token (see
--          "Passing on in process" below)
-- ARGV[11] with ARGV[10]: "1" to reserve the next k tokens
-- ARGV[12] release marker lifetime in milliseconds, given with the marker
-- ARGV[13] with ARGV[10]: the releasing client's clock in unix ms when it
--          passed the hold on, recorded as relock_since (absent: the
--          server's clock, one more call)
--
-- Every argument costs the server on every call, so what is the same for
-- every call of every client is written in the script instead: Redisson's
-- release message, grant_ttl (queue.lua) and k (below).
--
-- Returns  0: the owner holds no hold here (expired, deleted or never held)
--          1: one hold released, the owner still holds the lock
--          2: the last hold released, the lock is free
--          3: the last hold released, and the lock granted to a waiter of
--             another client, told on its grant channel
--          a negative integer -(2t + p): the last hold released, and the
--             lock granted to the member ARGV[8], whose fencing token is
--             t; p is 1 when the tokens t + 1 to t + k are reserved for
--             the grantee's client to pass the lock on in process.
--          With ARGV[10] (passing on in process), t being that token:
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
-- send this script with ARGV[10] to make it so in Redis. Such switches
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
-- does not queue is starved. A grant to another client's waiter holds the
-- lock for at most grant_ttl until that waiter renews it (see tell_grant
-- for a waiter that has died). Only kind "o" is granted by another
-- client: when another kind is first, the lock is freed and announced,
-- and its waiter tries for itself. Waiters listen on the release channel
-- only while a holder that is not relock may publish there; so when the
-- lock is freed, the first waiter of each client in the queue is also
-- told on its client's grant channel to check again now ("n:0:<owner>").

-- The release message is Redisson's; the arguments a plain release leaves
-- out are "".
local unlock_message = '0'
local preferred, leaving, passed = ARGV[8] or '', ARGV[9] or '', ARGV[10] or ''
local named = ARGV[3] == '0' and KEYS[4] or nil
local marker = (ARGV[12] or '') ~= '' and KEYS[#KEYS]

-- The common call, a plain release of the owner's last hold with no one
-- in the queue, frees the lock here, before any of the functions below is
-- made. Whatever it reads on the way is kept for the rest of the script:
-- count, the owner's hold count, and queued, whether the hash says someone
-- may be in the queue (relock_queued, see lock.lua).
local count, queued
if passed == '' and leaving == '' and not marker then
    local f = redis.call('hmget', KEYS[1], ARGV[1], queued_field)
    if not f[1] then
        return 0
    end
    queued = f[2] ~= false
    if f[1] == '1' and not queued and preferred == '' then
        redis.call('del', KEYS[1])
        redis.call(ARGV[2], ARGV[6], unlock_message)
        return 2
    end
    count = tonumber(f[1])
end

-- @library
-- k is how many tokens a grant reserves for passing on in process
-- (runBlock in pass.go, which a test compares with it), and self the
-- releasing client's "<uuid>", which ends its grant channel.
local k = 8
local self = string.match(ARGV[4], '[^:]*$')

-- may_pass reports whether the client may pass the lock on in process
-- once it holds it (see above), next being the first member of the queue
-- after its holder's (nil for none), and quiet whether no one else listens
-- on the release channel.
local function may_pass(next, quiet)
    return quiet and ARGV[5] == '1' and (not next or client(next) == self)
end

-- hold makes owner the holder with token t in place of old, the field of
-- the hold it replaces: the hash is marked for its release when anyone
-- (next, not nil) is in the queue behind the new hold, begun at since
-- (unix ms; nil or "": now, by the server's clock). The hash is written
-- over, never deleted first: a script that runs on the node of a slot
-- being migrated may touch no key that is not there at that moment (see
-- docs/design.md, Scripts).
local function hold(owner, t, next, since, old)
    since = at_or_now(since)
    if next then
        redis.call('hset', KEYS[1], owner, '1', token_field, t, since_field, since, queued_field, '1')
    else
        redis.call('hset', KEYS[1], owner, '1', token_field, t, since_field, since)
    end
    local gone = {}
    if old ~= owner then
        gone[1] = old
    end
    if not next then
        gone[#gone + 1] = queued_field
    end
    if #gone > 0 then
        redis.call('hdel', KEYS[1], unpack(gone))
    end
end

-- quiet_channel reports whether no one but the releasing client (when it
-- listens) listens on the release channel.
local function quiet_channel()
    local known = 0
    if ARGV[7] == '1' then
        known = 1
    end
    local numsub = 'numsub'
    if ARGV[2] == 'spublish' then
        numsub = 'shardnumsub'
    end
    return redis.call('pubsub', numsub, ARGV[6])[2] <= known
end

-- Redis does not undo the writes of a script that fails, so from here on
-- everything that may fail comes before the first write: the reads, and
-- the fencing tokens drawn (fence and reserve fail, on a fencing counter
-- that holds no number, before they write). A call leaving the queue is
-- taken out of it with the writes (leave), and left out of what is read
-- of the queue until then.
if passed ~= '' then
    local t = tonumber(passed)
    local holder, cur = holding(KEYS[1])
    if not cur or not holder or string.sub(holder, 1, #self + 1) ~= self .. ':' then
        redis.call('zrem', KEYS[3], preferred)
        return 0
    end
    if cur > t then
        redis.call('zrem', KEYS[3], preferred)
        return 4 * cur + 2
    end
    -- The first member of the queue after the waiter's, and the reply,
    -- with the tokens it reserves.
    local first = redis.call('zrange', KEYS[3], 0, 1)
    local next = first[1]
    if next == preferred then
        next = first[2]
    end
    local since = at_or_now(ARGV[13])
    local reply = switched(may_pass(next, quiet_channel()), ARGV[11], KEYS[2], named, k)
    redis.call('zrem', KEYS[3], preferred)
    hold(owner_of(preferred), t, next, since, holder)
    redis.call('pexpire', KEYS[1], string.match(preferred, '^(%d+)|'))
    return reply
end

local function leave()
    if leaving ~= '' then
        redis.call('zrem', KEYS[3], leaving)
    end
end
if leaving ~= '' and redis.call('type', KEYS[1]).ok ~= 'hash' then
    leave()
    return 0 -- nothing to release, whatever the key holds
end
if marker then
    local done = redis.call('get', marker)
    if done then
        leave()
        return tonumber(done)
    end
end
if not count then
    count = tonumber(redis.call('hget', KEYS[1], ARGV[1]))
    if count == nil then
        leave()
        return 0
    end
end
if count > 1 then
    leave()
    redis.call('hincrby', KEYS[1], ARGV[1], -1)
    if marker then
        redis.call('set', marker, '1', 'px', ARGV[12])
    end
    return 1
end

local result = 2
local grantee
local quiet = false
local queue = waiting(KEYS[3], queued)
if leaving ~= '' then
    queue = without(queue, leaving)
end
if #queue > 0 or preferred ~= '' then
    quiet = quiet_channel()
    if quiet then
        local first = queue[1]
        if first == nil or (client(first) == self and preferred ~= '') then
            grantee = preferred
            if first ~= nil and not redis.call('zscore', KEYS[3], grantee) then
                grantee = first
            end
        elseif ARGV[5] == '1' then
            grantee = first
        end
    end
end
if grantee and grantee ~= preferred and not string.match(grantee, '^%d+|o|') then
    grantee = nil -- a reentrant owner, or one that must see replicas acknowledge
end

local token
if grantee then
    now_ms() -- read for the grant's writes (hold, tell_grant) before them
    token = fence(KEYS[2], named)
end
leave()
if grantee then
    local lease = string.match(grantee, '^(%d+)|')
    local owner = owner_of(grantee)
    local mine = client(grantee) == self
    local ttl = tonumber(lease)
    if not mine then
        ttl = math.min(ttl, grant_ttl)
    end
    redis.call('zrem', KEYS[3], grantee)
    -- after is the first member of the queue behind the grantee, if any.
    local after
    for i = 1, #queue, 2 do
        if queue[i] ~= grantee then
            after = queue[i]
            break
        end
    end
    hold(owner, token, after, nil, ARGV[1])
    redis.call('pexpire', KEYS[1], ttl)
    if mine and grantee == preferred then
        result = -2 * token
        if may_pass(after, quiet) then
            -- Cannot fail: fence has just drawn from the same keys.
            reserve(KEYS[2], named, k)
            result = result - 1
        end
    else
        tell_grant(queue, grantee, token, ttl, ARGV[2], ARGV[4], self, grant_ttl)
        result = 3
    end
else
    redis.call('del', KEYS[1])
    redis.call(ARGV[2], ARGV[6], unlock_message)
    wake_clients(queue, ARGV[2], ARGV[4], self)
end
if marker then
    redis.call('set', marker, result, 'px', ARGV[12])
end
return result

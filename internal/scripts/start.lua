-- start.lua: New's script, sent in its one round trip: check that the
-- Redis user may publish on every kind of channel relock publishes on,
-- and only then make the Client known, as announce.lua does.
--
-- KEYS[1]       the identity hash of the client (layout.ClientKey)
-- ARGV[1]       "publish" or "spublish"
-- ARGV[2]       n, the number of channels to check
-- ARGV[3..2+n]  one channel of each kind relock publishes on
-- ARGV[3+n]     the identity hash's TTL in milliseconds
-- ARGV[4+n..]   field, value, field, value...
--
-- Returns       the channels of ARGV[3..2+n] the user may not publish on,
--               with nothing written; an empty array when it may publish
--               on all of them, and the hash written; 0, with nothing
--               written, when the server has no command ARGV[1] (renamed
--               or disabled by rename-command).
--
-- Redis does not undo the writes of a script that fails, and a PUBLISH
-- that the user's ACL refuses fails a script after its writes: a release
-- would stay applied while its call returned an error. So a Client is
-- made only for a user that may publish. redis.acl_check_cmd (Redis 7)
-- checks without sending anything; on Redis 6.2, which lacks it, an empty
-- message is published on each channel, of a name no lock uses.

-- A server without the command would fail every release after its writes
-- just the same: redis.acl_check_cmd raises an error for a command the
-- server does not know, and a call of it answers so.

local n = tonumber(ARGV[2])
local denied = {}
for i = 3, 2 + n do
    local ok
    if redis.acl_check_cmd then
        local known
        known, ok = pcall(redis.acl_check_cmd, ARGV[1], ARGV[i], '')
        if not known then
            return 0
        end
    else
        local r = redis.pcall(ARGV[1], ARGV[i], '')
        -- "Unknown Redis command called from script"; Valkey leaves out
        -- "Redis ".
        if type(r) == 'table' and r.err and string.find(r.err, 'Unknown %a*%s?command called from script') then
            return 0
        end
        ok = type(r) ~= 'table' or not r.err
    end
    if not ok then
        denied[#denied + 1] = ARGV[i]
    end
end
if #denied > 0 then
    return denied
end
redis.call('hset', KEYS[1], unpack(ARGV, 4 + n))
redis.call('pexpire', KEYS[1], ARGV[3 + n])
return denied

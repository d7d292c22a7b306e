-- rw_write_unlock.lua: release one write hold of a read-write lock, or
-- undo a write acquisition whose reply was lost.
--
-- KEYS[1]  lock hash (see rw_read_lock.lua)
-- KEYS[2]  release channel
-- KEYS[3]  marker, used as ARGV[4] says
-- ARGV[1]  writer field "<owner>:write"
-- ARGV[2]  message published when the write lock ends
-- ARGV[3]  "publish" or "spublish"
-- ARGV[4]  "0": no marker (one-shot owners, whose count is one)
--          "1": KEYS[3] is this release's marker: a retried release
--               returns the first answer instead of releasing again
--          "2": undo: KEYS[3] is the request marker of an acquisition
--               whose reply was lost; release only if it exists (it is
--               deleted)
-- ARGV[5]  release marker lifetime in milliseconds
-- ARGV[6]  prefix of the reader hold keys (see rw_read_lock.lua)
-- KEYS[4..6], ARGV[7..14]: the grant's (see rw_queue.lua)
--
-- Returns  0: the owner holds no write hold here
--          1: one hold released; the lock is still held: by this owner's
--             other write holds, or, after its last write hold, by its
--             read holds (downgrade: the lock turns to read mode)
--          2: the last hold released, the lock is free
--          3: the last hold released, and the lock granted to the first
--             waiting writer (see rw_queue.lua)
--          a negative integer -t: the last hold released, and the lock
--             handed to the releasing client's writer ARGV[14], with
--             fencing token t
--
-- When the last write hold goes, the message is published whether the lock
-- is free or turned to read mode: either way waiting readers may enter;
-- unless the lock, free, is granted to the next writer (rw_queue.lua).
-- Writers that may not listen are told on their grant channels then
-- (announce in rw_queue.lua).

if leave_queue() then
    return 0
end
if ARGV[4] == '1' then
    local done = redis.call('get', KEYS[3])
    if done then
        return tonumber(done)
    end
elseif ARGV[4] == '2' and redis.call('del', KEYS[3]) == 0 then
    return 0
end
-- One HGETALL reads the writer's count, the mode, and whether the hash
-- has read holds (numeric fields of other owners).
local fields = redis.call('hgetall', KEYS[1])
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
    return 0
end

local result = 1
-- Read holds left (the writer's own) keep the lock in read mode, for as
-- long as the longest of them.
local longest = 0
if count == 1 and readers then
    redis.call('hdel', KEYS[1], ARGV[1], token_field)
    longest = longest_reader(KEYS[1], ARGV[6])
end
if count > 1 then
    redis.call('hincrby', KEYS[1], ARGV[1], -1)
elseif longest > 0 then
    redis.call('hset', KEYS[1], 'mode', 'read')
    redis.call('pexpire', KEYS[1], longest)
    announce(ARGV[2])
else
    result = free()
end
if ARGV[4] == '1' then
    redis.call('set', KEYS[3], result, 'px', ARGV[5])
end
return result

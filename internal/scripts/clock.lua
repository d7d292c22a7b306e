-- clock.lua: the server's clock, shared by the scripts that read it, put
-- between each script's header and its body. Not a script of its own.

local now
-- now_ms returns the server's time in unix milliseconds, read once per
-- script call: everything that expires or ages does so by the server's
-- clock, never a client's.
local function now_ms()
    if not now then
        local t = redis.call('time')
        now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end
    return now
end

-- at_or_now returns ms, a time in unix milliseconds a client sent, or the
-- server's time when it sent none (nil or "").
local function at_or_now(ms)
    if not ms or ms == '' then
        return now_ms()
    end
    return ms
end

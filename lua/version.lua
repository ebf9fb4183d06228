-- version.lua: put before every voucher script that changes remaining or orders (lua.go does).
-- A voucher's version orders its states, so that an edge or the state bucket can keep the newest
-- whatever order backends publish them in. Each change sets it to max(version + 1, Redis's clock
-- in microseconds): it only goes up while the key lives, and when Redis restarts empty (or fails
-- over and loses recent writes, the version key included) the next change still gets a version
-- above every one published before, since one voucher's scripts run far less often than once a
-- microsecond. Only a Redis clock set back by more than the time since the lost writes breaks it.
-- KEYS[4] version (keys.Voucher.List's order: remaining, users, orders, version, definition)
-- bump_version() returns the new version.
local function bump_version()
  local t = redis.call('TIME')
  local v = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local last = tonumber(redis.call('GET', KEYS[4]) or '0')
  if v <= last then
    v = last + 1
  end
  redis.call('SET', KEYS[4], string.format('%d', v))
  return v
end

-- state.lua: read a voucher's sold-out state in one atomic step, so that its version names
-- exactly the remaining count and holders read with it.
-- KEYS[1] remaining, KEYS[2] users (unused), KEYS[3] orders, KEYS[4] version (as in keys.Voucher.List)
-- Returns {loaded, remaining, version, orderIds}:
--   loaded    1, or 0 when the voucher is not in Redis (remaining is then 0)
--   version   the version as a decimal string, "0" when Redis has none (lost with the voucher)
--   orderIds  every order holding a use when loaded with no use left (sold out), else empty
local version = redis.call('GET', KEYS[4]) or '0'
local remaining = redis.call('GET', KEYS[1])
if not remaining then
  return {0, 0, version, {}}
end
remaining = tonumber(remaining)
if remaining > 0 then
  return {1, remaining, version, {}}
end
return {1, remaining, version, redis.call('HKEYS', KEYS[3])}

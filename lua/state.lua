-- state.lua: read a voucher's state for the edges in one atomic step, so that its version names
-- exactly the remaining count, pause and holders read with it.
-- KEYS[1] remaining, KEYS[2] users (unused), KEYS[3] orders, KEYS[4] version, KEYS[5] definition
-- (as in keys.Voucher.List)
-- Returns {loaded, remaining, version, orderIds, paused}:
--   loaded    1, or 0 when the voucher is not in Redis (remaining is then 0)
--   version   the version as a decimal string, "0" when Redis has none (lost with the voucher)
--   orderIds  every order holding a use when loaded and sold out (no use left) or paused, else
--             empty: the orders whose retries an edge must still forward
--   paused    1 when the definition the gate holds is paused, else 0
local version = redis.call('GET', KEYS[4]) or '0'
local remaining = redis.call('GET', KEYS[1])
if not remaining then
  return {0, 0, version, {}, 0}
end
remaining = tonumber(remaining)
local paused = 0
if redis.call('HGET', KEYS[5], 'paused') == '1' then
  paused = 1
end
if remaining > 0 and paused == 0 then
  return {1, remaining, version, {}, 0}
end
return {1, remaining, version, redis.call('HKEYS', KEYS[3]), paused}

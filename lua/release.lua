-- release.lua: give back the use an order holds, once. Keeps remaining + HLEN(orders) constant.
-- KEYS[1] remaining, KEYS[2] users, KEYS[3] orders, KEYS[4] version, KEYS[5] definition (unused;
-- as in reserve.lua, holder "reservedAtMillis:attempt:customerId"); the version is raised when a
-- use comes back
-- ARGV[1] orderId
-- ARGV[2] expected holder, or "" for any: a compensation names the holder it wrote, so it never
--         gives back a use that a later attempt took for the same order.
-- Returns {status, remaining}:
--   { 1, remaining after the release }  the order's use is back
--   { 0, remaining or -1 if not loaded } the order held no use (or another holder's): nothing changed
local holder = redis.call('HGET', KEYS[3], ARGV[1])
if not holder or (ARGV[2] ~= '' and holder ~= ARGV[2]) then
  return {0, tonumber(redis.call('GET', KEYS[1]) or '-1')}
end
local first = string.find(holder, ':', 1, true)
local customer = string.sub(holder, string.find(holder, ':', first + 1, true) + 1)
redis.call('HDEL', KEYS[3], ARGV[1])
if redis.call('HINCRBY', KEYS[2], customer, -1) <= 0 then
  redis.call('HDEL', KEYS[2], customer)
end
bump_version()
return {1, redis.call('INCR', KEYS[1])}

-- peek.lua: read, changing nothing, what reserve.lua would decide on for an order, so a dry run
-- (POST /vouchers/{code}/validate) answers as a reservation would without taking a use.
-- KEYS[1] remaining, KEYS[2] users, KEYS[3] orders, KEYS[4] version and KEYS[5] definition
-- (unused; as in reserve.lua)
-- ARGV[1] customerId
-- ARGV[2] orderId
-- Returns {status, ...}, checked in reserve.lua's order:
--   { 1, holder }                       the order already holds a use (a retry)
--   {-3}                                the voucher is not loaded
--   { 0, remaining, customer's uses }   otherwise: what reserve.lua would compare
local holder = redis.call('HGET', KEYS[3], ARGV[2])
if holder then
  return {1, holder}
end
local remaining = redis.call('GET', KEYS[1])
if not remaining then
  return {-3}
end
return {0, tonumber(remaining), tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')}

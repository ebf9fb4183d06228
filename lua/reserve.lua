-- reserve.lua: take one use of a flash voucher for an order, atomically.
-- KEYS[1] remaining  integer: uses left
-- KEYS[2] users      hash customerId -> active uses
-- KEYS[3] orders     hash orderId -> holder "reservedAtMillis:attempt:customerId"
-- KEYS[4] version    raised when a use is taken (version.lua)
-- ARGV[1] customerId
-- ARGV[2] perUserLimit
-- ARGV[3] orderId
-- ARGV[4] holder to store: "nowMillis:attempt:customerId", attempt unique to this try
-- Returns {status, detail}:
--   { 1, remaining after the take }   reserved
--   { 0, holder }                     the order already holds a use (a retry)
--   {-1, 0}                           no use left
--   {-2, active uses of the customer} the customer is at the per-customer limit
--   {-3, 0}                           the voucher is not loaded
local holder = redis.call('HGET', KEYS[3], ARGV[3])
if holder then
  return {0, holder}
end
local remaining = redis.call('GET', KEYS[1])
if not remaining then
  return {-3, 0}
end
remaining = tonumber(remaining)
if remaining <= 0 then
  return {-1, 0}
end
local used = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
if used >= tonumber(ARGV[2]) then
  return {-2, used}
end
remaining = redis.call('DECR', KEYS[1])
redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
redis.call('HSET', KEYS[3], ARGV[3], ARGV[4])
bump_version()
return {1, remaining}

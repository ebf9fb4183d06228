-- reserve.lua: take one use of a flash voucher for an order, atomically.
-- KEYS[1] remaining   integer: uses left
-- KEYS[2] users       hash customerId -> active uses
-- KEYS[3] orders      hash orderId -> holder "reservedAtMillis:attempt:customerId"
-- KEYS[4] version     raised when a use is taken (version.lua)
-- KEYS[5] definition  hash rev, total, perUser, paused: the voucher's definition the gate holds (configure.lua)
-- ARGV[1] customerId
-- ARGV[2] perUserLimit, of the caller's copy of the voucher
-- ARGV[3] orderId
-- ARGV[4] holder to store: "nowMillis:attempt:customerId", attempt unique to this try
-- ARGV[5] the revision of the caller's copy of the voucher
-- Returns {status, detail}:
--   { 1, remaining after the take }   reserved
--   { 0, holder }                     the order already holds a use (a retry)
--   {-1, 0}                           no use left
--   {-2, active uses of the customer} the customer is at the per-customer limit
--   {-3, 0}                           the voucher is not loaded
--   {-4, revision held, as a string}  the gate holds another revision than the caller's ("0":
--                                     none): the caller's limits are not the gate's; decide again
--   {-5, 0}                           the voucher is paused
-- A retry is answered before the definition is looked at: a granted order keeps its use
-- whatever changed since.
local holder = redis.call('HGET', KEYS[3], ARGV[3])
if holder then
  return {0, holder}
end
local remaining = redis.call('GET', KEYS[1])
if not remaining then
  return {-3, 0}
end
local def = redis.call('HMGET', KEYS[5], 'rev', 'paused')
if def[1] ~= ARGV[5] then
  return {-4, def[1] or '0'}
end
if def[2] == '1' then
  return {-5, 0}
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

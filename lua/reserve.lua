-- reserve.lua: take uses of a flash voucher for orders, one after the other in the order given,
-- atomically: the calls of a crowd that queued together, as one script.
-- KEYS[1] remaining   integer: uses left
-- KEYS[2] users       hash customerId -> active uses
-- KEYS[3] orders      hash orderId -> holder "reservedAtMillis:attempt:customerId"
-- KEYS[4] version     raised when a use is taken (version.lua)
-- KEYS[5] definition  hash rev, total, perUser, paused: the voucher's definition the gate holds (configure.lua)
-- ARGV[1] n, the number of reservations; then five arguments for each, the i-th at 5i-3 .. 5i+1:
--   customerId
--   perUserLimit, of the caller's copy of the voucher
--   orderId
--   holder to store: "nowMillis:attempt:customerId", attempt unique to this try
--   the revision of the caller's copy of the voucher
-- Returns 2n values, {status, detail} for each reservation in turn:
--   { 1, remaining after the take }   reserved
--   { 0, holder }                     the order already holds a use (a retry, or an earlier
--                                     reservation of this call with the same orderId)
--   {-1, 0}                           no use left
--   {-2, active uses of the customer} the customer is at the per-customer limit
--   {-3, 0}                           the voucher is not loaded
--   {-4, revision held, as a string}  the gate holds another revision than the caller's ("0":
--                                     none): the caller's limits are not the gate's; decide again
--   {-5, 0}                           the voucher is paused
-- A retry is answered before the definition is looked at: a granted order keeps its use
-- whatever changed since. Each reservation sees what the ones before it took, exactly as if
-- each ran as a script of its own; the hashes are read once and written once for all of them.
local n = tonumber(ARGV[1])
local customers, orders = {}, {}
for i = 1, n do
  customers[i] = ARGV[5 * i - 3]
  orders[i] = ARGV[5 * i - 1]
end
local holders = redis.call('HMGET', KEYS[3], unpack(orders))
local used = redis.call('HMGET', KEYS[2], unpack(customers))
local remaining = redis.call('GET', KEYS[1])
local def = redis.call('HMGET', KEYS[5], 'rev', 'paused')
remaining = tonumber(remaining)

local out = {}
local taken = 0
local held_now, used_now = {}, {}
local put_orders, put_users = {}, {}
for i = 1, n do
  local customer, order, holder = customers[i], orders[i], ARGV[5 * i]
  local was = held_now[order] or holders[i]
  local status, detail = 1, 0
  if was then
    status, detail = 0, was
  elseif not remaining then
    status = -3
  elseif def[1] ~= ARGV[5 * i + 1] then
    status, detail = -4, def[1] or '0'
  elseif def[2] == '1' then
    status = -5
  elseif remaining <= 0 then
    status = -1
  else
    local uses = used_now[customer] or tonumber(used[i] or '0')
    if uses >= tonumber(ARGV[5 * i - 2]) then
      status, detail = -2, uses
    else
      remaining = remaining - 1
      taken = taken + 1
      used_now[customer] = uses + 1
      held_now[order] = holder
      put_orders[#put_orders + 1] = order
      put_orders[#put_orders + 1] = holder
      detail = remaining
    end
  end
  out[2 * i - 1] = status
  out[2 * i] = detail
end
if taken > 0 then
  redis.call('DECRBY', KEYS[1], taken)
  for customer, uses in pairs(used_now) do
    put_users[#put_users + 1] = customer
    put_users[#put_users + 1] = uses
  end
  redis.call('HSET', KEYS[2], unpack(put_users))
  redis.call('HSET', KEYS[3], unpack(put_orders))
  bump_version()
end
return out

-- hold.lua: put back an order the database holds but Redis lost, unless Redis has it.
-- Keeps remaining + HLEN(orders) constant: the use comes out of remaining, which may go below
-- zero when Redis had sold it again; reserve.lua then refuses until the hanging ones are released.
-- KEYS[1] remaining, KEYS[2] users, KEYS[3] orders, KEYS[4] version (as in reserve.lua); the
-- version is raised when the order is put back
-- ARGV[1] orderId
-- ARGV[2] holder "reservedAtMillis:attempt:customerId"
-- ARGV[3] customerId
-- Returns 1 if it put the order back, 0 if Redis held it already or the voucher is not loaded.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
if redis.call('HSETNX', KEYS[3], ARGV[1], ARGV[2]) == 0 then
  return 0
end
redis.call('HINCRBY', KEYS[2], ARGV[3], 1)
redis.call('DECR', KEYS[1])
bump_version()
return 1

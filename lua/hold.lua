-- hold.lua: put back an order the database holds but Redis lost, unless Redis holds it for the
-- row's customer.
-- Keeps remaining + HLEN(orders) constant: the use comes out of remaining, which may go below
-- zero when Redis had sold it again; reserve.lua then refuses until the hanging ones are released.
-- An order Redis holds for another customer (after a lost write, another customer's take of the
-- same orderId) becomes the row's: that take can never be written, since an orderId has one
-- redemption, and its attempt then finds nothing of its own to give back. remaining is unchanged.
-- KEYS[1] remaining, KEYS[2] users, KEYS[3] orders, KEYS[4] version, KEYS[5] definition (unused;
-- as in reserve.lua); the version is raised when the order is put back or changes hands
-- ARGV[1] orderId
-- ARGV[2] holder "reservedAtMillis:attempt:customerId"
-- ARGV[3] customerId
-- Returns 1 if it put the order back, 2 if it took the order over from another customer, 0 if
-- Redis held it for this customer already or the voucher is not loaded.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local holder = redis.call('HGET', KEYS[3], ARGV[1])
if not holder then
  redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
  redis.call('HINCRBY', KEYS[2], ARGV[3], 1)
  redis.call('DECR', KEYS[1])
  bump_version()
  return 1
end
local first = string.find(holder, ':', 1, true)
local customer = string.sub(holder, string.find(holder, ':', first + 1, true) + 1)
if customer == ARGV[3] then
  return 0
end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
if redis.call('HINCRBY', KEYS[2], customer, -1) <= 0 then
  redis.call('HDEL', KEYS[2], customer)
end
redis.call('HINCRBY', KEYS[2], ARGV[3], 1)
bump_version()
return 2

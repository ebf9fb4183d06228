-- load.lua: load a flash voucher from the database's active redemptions, unless it is loaded.
-- Loading twice must never add uses, so the check and the writes are one script (SET NX-style).
-- KEYS[1] remaining, KEYS[2] users, KEYS[3] orders, KEYS[4] version, KEYS[5] definition (as in
-- reserve.lua); a load raises the version above any published before, even when Redis lost it
-- (version.lua)
-- ARGV[1] total_limit
-- ARGV[2] revision of the definition read with the rows
-- ARGV[3] per_user_limit
-- ARGV[4] paused: '1' or '0'
-- ARGV[5..] triples: orderId, holder ("reservedAtMillis:attempt:customerId"), customerId,
--           one per RESERVED or CONFIRMED redemption
-- The definition is written unless the gate holds a newer revision (an edit that ran after the
-- rows were read, configure.lua), whose total_limit then counts.
-- Returns {1, remaining} when it loaded the voucher, {0, remaining} when it was loaded already.
local remaining = redis.call('GET', KEYS[1])
if remaining then
  return {0, tonumber(remaining)}
end
local total = tonumber(ARGV[1])
local def = redis.call('HMGET', KEYS[5], 'rev', 'total')
if def[1] and tonumber(def[1]) >= tonumber(ARGV[2]) then
  total = tonumber(def[2])
else
  redis.call('HSET', KEYS[5], 'rev', ARGV[2], 'total', ARGV[1], 'perUser', ARGV[3], 'paused', ARGV[4])
end
redis.call('DEL', KEYS[2], KEYS[3])
local held = 0
for i = 5, #ARGV, 3 do
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
  redis.call('HINCRBY', KEYS[2], ARGV[i + 2], 1)
  held = held + 1
end
remaining = total - held
if remaining < 0 then
  remaining = 0
end
redis.call('SET', KEYS[1], remaining)
bump_version()
return {1, remaining}

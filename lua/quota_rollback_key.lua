-- quota_rollback_key.lua: bind a partial rollback's rollbackKey to its items, once per idemKey,
-- before any identity gives back: whatever identities the items name, the same rollbackKey
-- with other items (another identity, a subset, another amount) is refused, so a key acts once
-- per idemKey and not once per identity. The identities' own records (quota_partial.lua) keep
-- what each gave back.
-- KEYS[1] the request's rollbackKeys: hash of rollbackKey -> fingerprint of all its items; it
--         shares the request record's hash tag (see quota_register.lua)
-- ARGV[1] rollbackKey
-- ARGV[2] fingerprint of every item of the partial rollback, whatever their order
-- ARGV[3] how long the hash lives, ms (the idemKey's records' time)
-- Returns:
--   1  bound now: give back
--   2  bound before to the same items: a retry, whose identities answer what they gave back
--   0  bound before to other items; nothing changed
local fp = redis.call('HGET', KEYS[1], ARGV[1])
if fp == ARGV[2] then
  return 2
end
if fp then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1

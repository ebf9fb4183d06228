-- quota_register.lua: note which identities a deduct touches, so a rollback that names only
-- bizId and idemKey finds them; refuse if the idemKey was rolled back already. A deduct
-- registers before its first step counts, and reads the request's generation (see
-- quota_settle.lua).
-- KEYS[1] the request's record: hash of identity ("TYPE:identity") -> '', and '!' once rolled
--         back, 'gen' and 'ok' (see quota_settle.lua)
-- ARGV[1] how long the record lives, ms
-- ARGV[2..] the identities
-- Returns the request's generation (0 or more) once noted, or -1 if the idemKey was rolled back
-- (nothing changed)
if redis.call('HEXISTS', KEYS[1], '!') == 1 then
  return -1
end
for i = 2, #ARGV do
  redis.call('HSET', KEYS[1], ARGV[i], '')
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return tonumber(redis.call('HGET', KEYS[1], 'gen') or '0')

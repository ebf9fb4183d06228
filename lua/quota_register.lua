-- quota_register.lua: note which identities a deduct touches, so a rollback that names only
-- bizId and idemKey finds them; refuse if the idemKey was rolled back already.
-- KEYS[1] the request's record: hash of identity ("TYPE:identity") -> '', and '!' once rolled back
-- ARGV[1] how long the record lives, ms
-- ARGV[2..] the identities
-- Returns 1 noted, 0 the idemKey was rolled back (nothing changed)
if redis.call('HEXISTS', KEYS[1], '!') == 1 then
  return 0
end
for i = 2, #ARGV do
  redis.call('HSET', KEYS[1], ARGV[i], '')
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1

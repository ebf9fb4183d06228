-- quota_close.lua: mark a request rolled back, so no deduct with its idemKey registers again,
-- and list the identities its deducts noted.
-- KEYS[1] the request's record (see quota_register.lua)
-- ARGV[1] how long the record lives, ms
-- Returns the identities ("TYPE:identity"), possibly none
redis.call('HSET', KEYS[1], '!', '1')
redis.call('PEXPIRE', KEYS[1], ARGV[1])
local ids = {}
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
  if f ~= '!' and f ~= 'gen' and f ~= 'ok' then
    ids[#ids + 1] = f
  end
end
return ids

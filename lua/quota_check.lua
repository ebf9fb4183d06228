-- quota_check.lua: a dry run of quota_deduct.lua on one identity: what it would answer now,
-- changing nothing (no rolling entry trimmed, no record written or touched). All keys share the
-- identity's hash tag, so it runs on Redis Cluster as the deduct does.
-- KEYS, ARGV: quota_deduct.lua's, without the request's part; ARGV[2], ARGV[3] (the attempt),
--         ARGV[5] and ARGV[6] are not read
-- Returns what quota_deduct.lua would return, in its shapes:
--   { 1, used }              every counter has room: used is what each would reach,
--                            "used:oldestMs" per counter, space separated (oldest 0 for 'C')
--   { 0, c, used }           the idemKey took from this identity already: its recorded answer
--   {-1, i, used, oldestMs}  counter i (1-based) has no room for its amount
--   {-2}                     the idemKey was rolled back (this identity's mark)
--   {-3}                     the idemKey took with other items
local st = redis.call('HGET', KEYS[1], 'st')
if st then
  if st == 'R' then
    return {-2}
  end
  local r = redis.call('HMGET', KEYS[1], 'fp', 'c', 'u')
  if r[1] ~= ARGV[4] then
    return {-3}
  end
  return {0, r[2], r[3]}
end

local now = tonumber(ARGV[1])
local out = {}
local k = 3 -- KEYS[2], the index, is not read
for i = 1, tonumber(ARGV[7]) do
  local a = 7 + (i - 1) * 4
  local limit, amount = tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local used, old, after
  local kind = ARGV[a + 1]
  if kind == 'C' or kind == 'c' then
    used, old, after = tonumber(redis.call('GET', KEYS[k]) or '0'), '0', '0'
    k = k + 1
  else
    -- the entries quota_deduct.lua would trim no longer count: read past them
    local cutoff = now - tonumber(ARGV[a + 4])
    used = tonumber(redis.call('GET', KEYS[k + 1]) or '0')
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[k], '-inf', cutoff)) do
      used = used - tonumber(string.match(m, '^(%d+):'))
    end
    if used < 0 then
      used = 0
    end
    local o = redis.call('ZRANGEBYSCORE', KEYS[k], '(' .. cutoff, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    old = o[2] or '0'
    -- the oldest entry once this one is added at now
    after = ARGV[1]
    if o[2] and tonumber(o[2]) < now then
      after = o[2]
    end
    k = k + 2
  end
  if used + amount > limit then
    return {-1, i, string.format('%d', used), old}
  end
  out[i] = string.format('%d', used + amount) .. ':' .. after
end
return {1, table.concat(out, ' ')}

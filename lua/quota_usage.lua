-- quota_usage.lua: read one identity's counters. Drops rolling entries that stopped counting,
-- which changes no answer, so it is as safe to repeat as a read.
-- KEYS    the counters, as in quota_deduct.lua
-- ARGV[1] now, unix ms
-- ARGV[2] n, the number of counters; then two per counter: kind ('C' or 'R'), span ms
-- Returns "used:oldestMs" per counter, space separated (oldest 0 for 'C' or an empty window)
local now = tonumber(ARGV[1])
local out = {}
local k = 1
for i = 1, tonumber(ARGV[2]) do
  local kind, span = ARGV[2 + (i - 1) * 2 + 1], tonumber(ARGV[2 + (i - 1) * 2 + 2])
  if kind == 'C' then
    out[i] = string.format('%d', tonumber(redis.call('GET', KEYS[k]) or '0')) .. ':0'
    k = k + 1
  else
    local zkey, skey = KEYS[k], KEYS[k + 1]
    local gone = redis.call('ZRANGEBYSCORE', zkey, '-inf', now - span)
    if #gone > 0 then
      local sum = 0
      for _, m in ipairs(gone) do
        sum = sum + tonumber(string.match(m, '^(%d+):'))
      end
      redis.call('ZREMRANGEBYRANK', zkey, 0, #gone - 1)
      if redis.call('DECRBY', skey, sum) <= 0 then
        redis.call('DEL', skey)
      end
    end
    local o = redis.call('ZRANGE', zkey, 0, 0, 'WITHSCORES')
    out[i] = string.format('%d', tonumber(redis.call('GET', skey) or '0')) .. ':' .. (o[2] or '0')
    k = k + 2
  end
end
return table.concat(out, ' ')

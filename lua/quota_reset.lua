-- quota_reset.lua: set some of one identity's counters, in their current windows, to zero (a
-- reset after a support ticket), and note when, so that a rollback or undo of a step taken
-- before it gives back nothing on those counters (the reset forgave it already; giving it back
-- again would let the identity buy past its limit). A rolling counter's entries go with it, so
-- nothing of them can be given back either. All keys share the identity's hash tag.
-- KEYS[1]   the identity's resets: hash of counter key -> when it was last reset, Redis' TIME
--           in µs, the clock quota_deduct.lua stamps records with (one server's, whatever the
--           callers' clocks); it lives as long as the longest counter it names
-- KEYS[2..] the counters, as in quota_deduct.lua ('C': one key; 'R': the entries and the sum)
-- ARGV[1] now, unix ms
-- ARGV[2] n, the number of counters; then two per counter: kind ('C' or 'R'), span ms ('C':
--         how long the counter lives from now; 'R': the window's size)
-- Returns what each counter held (its use in the window), space separated
local now = tonumber(ARGV[1])
local t = redis.call('TIME')
local stamp = t[1] .. string.format('%06d', tonumber(t[2]))
local out = {}
local longest = 0
local k = 2
for i = 1, tonumber(ARGV[2]) do
  local kind, span = ARGV[2 + (i - 1) * 2 + 1], tonumber(ARGV[2 + (i - 1) * 2 + 2])
  local held
  if kind == 'C' then
    held = tonumber(redis.call('GET', KEYS[k]) or '0')
    redis.call('DEL', KEYS[k])
    redis.call('HSET', KEYS[1], KEYS[k], stamp)
    if span > longest then
      longest = span
    end
    k = k + 1
  else
    -- the sum counts entries still in the window; older ones count no more
    held = tonumber(redis.call('GET', KEYS[k + 1]) or '0')
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[k], '-inf', now - span)) do
      held = held - tonumber(string.match(m, '^(%d+):'))
    end
    if held < 0 then
      held = 0
    end
    redis.call('DEL', KEYS[k], KEYS[k + 1])
    k = k + 2
  end
  out[i] = string.format('%d', held)
end
if longest > 0 and redis.call('PTTL', KEYS[1]) < longest then
  redis.call('PEXPIRE', KEYS[1], longest)
end
return table.concat(out, ' ')

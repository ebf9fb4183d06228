-- quota_partial.lua: a partial rollback of one identity's deduct step: for each item (an amount
-- and the counters its dimensions name), give back the amount on those counters and on the
-- step's "*" counters, once per rollbackKey. An item gives back no more than is left of it on
-- every counter it names (what the step took there less what was given back), so a "*" counter,
-- which also counts the step's other items, never gives back theirs. What partial rollbacks
-- gave back is kept in the record (g), so their sum never passes what the step took, and a
-- whole rollback or an undo (quota_giveback.lua) gives back only the rest. A rolling entry
-- "amount:idemKey" is replaced by one of what is left, at its score. Nothing is given back on a
-- counter reset after the step took (quota_reset.lua forgave it).
-- KEYS[1]   the identity's record of the idemKey (see quota_deduct.lua)
-- KEYS[2]   the identity's resets (see quota_giveback.lua)
-- KEYS[3..] every counter the record names, in its order, as in quota_deduct.lua
-- ARGV[1] the attempt that took the step, as the caller read the record ('' if none)
-- ARGV[2] idemKey
-- ARGV[3] the rollbackKey's field in the record: "p:<rollbackKey>"
-- ARGV[4] fingerprint of the identity's items in this partial rollback
-- ARGV[5] how long a record made here lives, ms (one the caller did not find: see below)
-- ARGV[6] n, the number of counters; then three per counter: kind ('C' or 'R'), the amount
--         the step took, '1' for a "*" counter (every item counts toward it) else '0'
-- ARGV[7+3n] m, the number of items; then per item: its amount, c, and the c counters
--         (1-based) its dimensions name, "*" counters left out
-- Returns:
--   { 1, given }  given back now; given is the amount per counter, space separated
--   { 2, given }  this rollbackKey gave back before: its answer, nothing changed
--   { 0 }         nothing to give back: no step of the idemKey took from this identity, or it
--                 was rolled back or undone; kept as this rollbackKey's answer (a record is
--                 made for it if none), so a retry answers the same
--   {-1 }         a deduct took since the caller read the record: read it again
--   {-3 }         this rollbackKey gave back for other items; nothing changed
local rec = KEYS[1]
local prev = redis.call('HGET', rec, ARGV[3])
if prev then
  local fp, given = string.match(prev, '^([^|]*)|(.*)$')
  if fp ~= ARGV[4] then
    return {-3}
  end
  if given == '' then
    return {0}
  end
  return {2, given}
end
local r = redis.call('HMGET', rec, 'st', 'at', 'g', 't')
if r[1] == 'D' and r[2] ~= ARGV[1] then
  return {-1}
end
if r[1] ~= 'D' then
  redis.call('HSET', rec, ARGV[3], ARGV[4] .. '|')
  if not r[1] then
    redis.call('PEXPIRE', rec, ARGV[5])
  end
  return {0}
end

local gone = {}
for v in string.gmatch(r[3] or '', '%d+') do
  gone[#gone + 1] = tonumber(v)
end
local took = tonumber(r[4] or '0')
local n = tonumber(ARGV[6])
local kinds, taken, star, key = {}, {}, {}, {}
local k = 3
for i = 1, n do
  local a = 6 + (i - 1) * 3
  kinds[i], taken[i], star[i], key[i] = ARGV[a + 1], tonumber(ARGV[a + 2]), ARGV[a + 3] == '1', k
  gone[i] = gone[i] or 0
  if kinds[i] == 'C' then
    k = k + 1
  else
    k = k + 2
  end
end

-- give back up to want on counter i; return what it gave
local function give(i, want)
  local left = taken[i] - gone[i]
  local g = math.min(want, left)
  if g <= 0 then
    return 0
  end
  local kk = key[i]
  local given = 0
  if kinds[i] == 'C' then
    local v = tonumber(redis.call('GET', KEYS[kk]) or '0')
    local reset = redis.call('HGET', KEYS[2], KEYS[kk])
    if v > 0 and not (reset and took <= tonumber(reset)) then
      given = math.min(v, g)
      if v - given <= 0 then
        redis.call('DEL', KEYS[kk])
      else
        redis.call('DECRBY', KEYS[kk], given)
      end
    end
  else
    local m = left .. ':' .. ARGV[2]
    local score = redis.call('ZSCORE', KEYS[kk], m)
    if score then
      redis.call('ZREM', KEYS[kk], m)
      if left > g then
        redis.call('ZADD', KEYS[kk], score, (left - g) .. ':' .. ARGV[2])
      end
      given = g
      if redis.call('DECRBY', KEYS[kk + 1], g) <= 0 then
        redis.call('DEL', KEYS[kk + 1])
      end
    end
  end
  gone[i] = gone[i] + given
  return given
end

local out = {}
for i = 1, n do
  out[i] = 0
end
local p = 7 + 3 * n
for _ = 1, tonumber(ARGV[p]) do
  local amount, c = tonumber(ARGV[p + 1]), tonumber(ARGV[p + 2])
  for j = 1, c do -- no more than is left of the item on each counter it names
    local i = tonumber(ARGV[p + 2 + j])
    amount = math.min(amount, taken[i] - gone[i])
  end
  for j = 1, c do
    local i = tonumber(ARGV[p + 2 + j])
    out[i] = out[i] + give(i, amount)
  end
  for i = 1, n do
    if star[i] then
      out[i] = out[i] + give(i, amount)
    end
  end
  p = p + 3 + c
end
for i = 1, n do
  out[i] = string.format('%d', out[i])
end
local g = {}
for i = 1, n do
  g[i] = string.format('%d', gone[i])
end
local answer = table.concat(out, ' ')
redis.call('HSET', rec, 'g', table.concat(g, ' '), ARGV[3], ARGV[4] .. '|' .. answer)
return {1, answer}

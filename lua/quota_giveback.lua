-- quota_giveback.lua: give back what one identity's deduct step took, at most once.
-- Mode 'U' (undo) reverses a step the calling attempt holds (took, or replayed last) after the
-- request could not complete; the record goes, so a retry may try again. Mode 'R' (rollback)
-- marks the record rolled back and keeps it, so a late deduct with the same idemKey is refused;
-- a missing record becomes such a mark. Either gives back only what partial rollbacks have not
-- (the record's g), and nothing on a counter reset after the step took (a reset forgave it).
-- KEYS[1]   the identity's record of the idemKey (see quota_deduct.lua)
-- KEYS[2]   the identity's resets: hash of counter key -> when it was last reset, Redis' TIME
--           in µs (see quota_reset.lua)
-- KEYS[3..] the counters the record names, as in quota_deduct.lua
-- ARGV[1] mode, 'U' or 'R'
-- ARGV[2] mode 'U': the attempt that must hold the step; mode 'R': the attempt that took it, as
--         the caller read it ('' when the caller found no record)
-- ARGV[3] how long a rolled-back record lives, ms
-- ARGV[4] idemKey
-- ARGV[5] n, the number of counters; then two per counter: kind ('C' or 'R'), the amount the
--         step took
-- Returns:
--   { 1, given }  given back; given is the amount returned per counter, space separated (an
--                 entry or counter that had expired or was reset returns 0)
--   { 0 }         nothing to do: already rolled back or undone, or (undo) another attempt holds
--                 the step now
--   {-1 }         (rollback) the record is not what the caller read: read it again
local rec = KEYS[1]
local r = redis.call('HMGET', rec, 'st', 'at', 'ow', 'g', 't')
local st, at = r[1], r[2]
if ARGV[1] == 'U' then
  if st ~= 'D' or (r[3] or at) ~= ARGV[2] then
    return {0}
  end
else
  if st == 'R' then
    return {0}
  end
  if not st then
    if ARGV[2] ~= '' then
      return {-1}
    end
    redis.call('HSET', rec, 'st', 'R')
    redis.call('PEXPIRE', rec, ARGV[3])
    return {0}
  end
  if at ~= ARGV[2] then
    return {-1}
  end
end

-- what partial rollbacks gave back already, per counter
local gone = {}
for v in string.gmatch(r[4] or '', '%d+') do
  gone[#gone + 1] = tonumber(v)
end
local took = tonumber(r[5] or '0') -- a record older than resets has none: before any reset

local n = tonumber(ARGV[5])
local out = {}
local k = 3
for i = 1, n do
  local kind = ARGV[5 + (i - 1) * 2 + 1]
  local amount = tonumber(ARGV[5 + (i - 1) * 2 + 2]) - (gone[i] or 0)
  local given = 0
  if kind == 'C' then
    local v = tonumber(redis.call('GET', KEYS[k]) or '0')
    local reset = redis.call('HGET', KEYS[2], KEYS[k])
    if v > 0 and amount > 0 and not (reset and took <= tonumber(reset)) then
      given = math.min(v, amount)
      if v - given <= 0 then
        redis.call('DEL', KEYS[k])
      else
        redis.call('DECRBY', KEYS[k], given)
      end
    end
    k = k + 1
  else
    if amount > 0 and redis.call('ZREM', KEYS[k], amount .. ':' .. ARGV[4]) == 1 then
      given = amount
      if redis.call('DECRBY', KEYS[k + 1], amount) <= 0 then
        redis.call('DEL', KEYS[k + 1])
      end
    end
    k = k + 2
  end
  out[i] = string.format('%d', given)
end
if ARGV[1] == 'U' then
  redis.call('DEL', rec)
else
  redis.call('HSET', rec, 'st', 'R')
  redis.call('PEXPIRE', rec, ARGV[3])
end
return {1, table.concat(out, ' ')}

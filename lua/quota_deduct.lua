-- quota_deduct.lua: one identity's step of a quota deduct. Checks every counter, then takes the
-- amounts from all of them or from none, and records what it took under the idempotency key.
-- All keys share the identity's hash tag. "now" comes from the caller: windows never follow
-- Redis' clock. TIME is read once, only to order the step against counter resets on this
-- server (quota_reset.lua), whatever the callers' clocks.
-- KEYS[1]   the identity's record of this idemKey: hash st ('D' taken, 'R' rolled back),
--           at (the attempt that took: its answer is every attempt's answer), ow (the attempt
--           that holds the step: the last to take or replay it; only it may undo it),
--           fp (fingerprint of the items), c (counters, caller's encoding), u (used), t (when
--           it took, Redis' TIME in µs); later g (given back per counter, by partial rollbacks)
--           and p:<rollbackKey> (quota_partial.lua)
-- KEYS[2]   the identity's index of counters whose names only items give (a wildcard rule's,
--           such as ITEM:* counting ITEM:1001): a sorted set of the counter keys' names after
--           the identity's part, scored by when each stops counting, for usage by identity
-- KEYS[3..] the counters, in ARGV order: kind 'C' (calendar or fixed period) is one integer key;
--           kind 'R' (rolling) is two keys: a sorted set of entries "amount:idemKey" scored by
--           their time in ms, and the integer sum of the entries' amounts. Lower case 'c', 'r':
--           the same, and the counter is noted in the index
-- ARGV[1] now, unix ms
-- ARGV[2] how long the record lives, ms
-- ARGV[3] attempt id of this call
-- ARGV[4] fingerprint of the identity's items
-- ARGV[5] idemKey
-- ARGV[6] the counters, encoded by the caller; stored in the record and returned on a replay
-- ARGV[7] n, the number of counters; then four per counter:
--         kind, limit, amount, span ms ('C': how long a new key lives; 'R': the window size)
-- On a single Redis a call may also do the work of a script on the request's record, saving a
-- call: then the last KEY is that record (see quota_register.lua) and ARGV[8+4n] says which:
--   'R' quota_register.lua's, before the step: ARGV[9+4n..] are the request's identities. The
--       reply gets the request's generation appended (0 if it was rolled back).
--   'S' quota_settle.lua's, for the last identity of a request of several: ARGV[9+4n] is the
--       generation the attempt registered under. Unless the request is complete, the step runs
--       only if that generation is current; a step taken or replayed then completes the request
--       ('C'), a refusal bumps the generation ('G'). The reply gets 1 appended if the request
--       is complete (the caller keeps every step it holds), else 0 (it gives them back).
-- On a cluster that record lives elsewhere and this part is unused.
-- Returns:
--   { 1, used }        taken by this attempt (or this very call, sent again); used is
--                      "used:oldestMs" per counter, space separated (oldest 0 for 'C')
--   { 0, c, used }     another attempt of the idemKey took from this identity: the first answer,
--                      no counter changed; this attempt holds the step now
--   {-1, i, used, oldestMs}  counter i (1-based) has no room for its amount; nothing changed
--   {-2}               the idemKey was rolled back (this identity's mark, or the request's);
--                      nothing changed
--   {-3}               the idemKey took with other items; nothing changed
--   {-4}               ('S') another attempt of the idemKey is giving back its steps: nothing
--                      changed here, the generation was bumped; give back what you hold, retry
local rec = KEYS[1]
local n = tonumber(ARGV[7])
local op = ARGV[8 + 4 * n]
local req = KEYS[#KEYS]
local gen, open

if op == 'R' then
  if redis.call('HEXISTS', req, '!') == 1 then
    return {-2, 0}
  end
  for i = 9 + 4 * n, #ARGV do
    redis.call('HSET', req, ARGV[i], '')
  end
  redis.call('PEXPIRE', req, ARGV[2])
  gen = tonumber(redis.call('HGET', req, 'gen') or '0')
elseif op == 'S' then
  local r = redis.call('HMGET', req, '!', 'ok', 'gen')
  if r[1] then
    return {-2, 0}
  end
  open = not r[2]
  if open and (r[3] or '0') ~= ARGV[9 + 4 * n] then
    redis.call('HINCRBY', req, 'gen', 1)
    redis.call('PEXPIRE', req, ARGV[2])
    return {-4, 0}
  end
end

-- the reply t, with what the request's part appends
local function answer(t)
  if op == 'R' then
    t[#t + 1] = gen
  elseif op == 'S' then
    if open then
      if t[1] >= 0 then
        redis.call('HSET', req, 'ok', '1')
      else
        redis.call('HINCRBY', req, 'gen', 1)
      end
      redis.call('PEXPIRE', req, ARGV[2])
    end
    if t[1] >= 0 or not open then
      t[#t + 1] = 1
    else
      t[#t + 1] = 0
    end
  end
  return t
end

local st = redis.call('HGET', rec, 'st')
if st then
  if st == 'R' then
    return answer({-2})
  end
  local r = redis.call('HMGET', rec, 'fp', 'c', 'u', 'at')
  if r[1] ~= ARGV[4] then
    return answer({-3})
  end
  redis.call('HSET', rec, 'ow', ARGV[3])
  if r[4] == ARGV[3] then
    return answer({1, r[3]}) -- this very call, sent again (a client retry): still this attempt's
  end
  return answer({0, r[2], r[3]})
end

local now = tonumber(ARGV[1])

-- drop a rolling counter's entries made at or before cutoff; return the sum left
local function trim(zkey, skey, cutoff)
  local gone = redis.call('ZRANGEBYSCORE', zkey, '-inf', cutoff)
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
  return tonumber(redis.call('GET', skey) or '0')
end

local function oldest(zkey)
  local o = redis.call('ZRANGE', zkey, 0, 0, 'WITHSCORES')
  return o[2] or '0'
end

-- check every counter before changing any
local k = 3
for i = 1, n do
  local a = 7 + (i - 1) * 4
  local limit, amount = tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local used, old
  local kind = ARGV[a + 1]
  if kind == 'C' or kind == 'c' then
    used, old = tonumber(redis.call('GET', KEYS[k]) or '0'), '0'
    k = k + 1
  else
    used = trim(KEYS[k], KEYS[k + 1], now - tonumber(ARGV[a + 4]))
    old = oldest(KEYS[k])
    k = k + 2
  end
  if used + amount > limit then
    return answer({-1, i, string.format('%d', used), old})
  end
end

-- note a counter in the index until it stops counting, at now + span
local base = #KEYS[1] - #ARGV[5] - 2 -- the record is <identity's part>i:<idemKey>
local function note(key, span)
  local idx = KEYS[2]
  if redis.call('ZADD', idx, 'GT', now + span, string.sub(key, base + 1)) == 1 then
    redis.call('ZREMRANGEBYSCORE', idx, '-inf', now) -- a new name: drop those that stopped
  end
  if redis.call('PTTL', idx) < span then
    redis.call('PEXPIRE', idx, span)
  end
end

local out = {}
k = 3
for i = 1, n do
  local a = 7 + (i - 1) * 4
  local amount, span = ARGV[a + 3], ARGV[a + 4]
  local kind = ARGV[a + 1]
  if kind == 'C' or kind == 'c' then
    local v = redis.call('INCRBY', KEYS[k], amount)
    if v == tonumber(amount) then
      -- a new counter: it goes when its period ends, which later deducts do not move
      redis.call('PEXPIRE', KEYS[k], span)
    end
    out[i] = string.format('%d', v) .. ':0'
    k = k + 1
  else
    redis.call('ZADD', KEYS[k], now, amount .. ':' .. ARGV[5])
    local v = redis.call('INCRBY', KEYS[k + 1], amount)
    redis.call('PEXPIRE', KEYS[k], span)
    redis.call('PEXPIRE', KEYS[k + 1], span)
    out[i] = string.format('%d', v) .. ':' .. oldest(KEYS[k])
    k = k + 2
  end
  if kind == 'c' or kind == 'r' then
    note(KEYS[k - (kind == 'c' and 1 or 2)], tonumber(span))
  end
end
local used = table.concat(out, ' ')
local t = redis.call('TIME')
redis.call('HSET', rec, 'st', 'D', 'at', ARGV[3], 'ow', ARGV[3], 'fp', ARGV[4], 'c', ARGV[6], 'u', used,
  't', t[1] .. string.format('%06d', tonumber(t[2])))
redis.call('PEXPIRE', rec, ARGV[2])
return answer({1, used})

-- quota_settle.lua: decide, once, whether a deduct of several identities keeps its steps. Its
-- attempts (a client's retries, possibly at once) visit the identities one by one, each taking a
-- step or replaying another attempt's; an attempt answers success only after completing the
-- request here, and gives steps back only after bumping its generation here. A request never
-- completes under a generation older than the attempt's own registration, so no attempt
-- answers success on a step that another gives back, and a complete request gives back nothing
-- until its rollback.
-- KEYS[1] the request's record (see quota_register.lua): 'ok' once complete, 'gen' the
--         generation (0 if absent), '!' once rolled back
-- ARGV[1] 'C' complete: the attempt took or replayed every step
--         'G' give back: the attempt holds steps it must give back (a later step refused)
-- ARGV[2] the generation the attempt registered under
-- ARGV[3] how long the record lives, ms
-- Returns:
--    1  the request is complete: keep every step ('C': also when the generation moved on)
--    0  the generation was bumped: give back the steps you hold ('C': another attempt gives
--       back, answer "retry")
--   -2  the idemKey was rolled back
local r = redis.call('HMGET', KEYS[1], '!', 'ok', 'gen')
if r[1] then
  return -2
end
if r[2] then
  return 1
end
if ARGV[1] == 'C' and (r[3] or '0') == ARGV[2] then
  redis.call('HSET', KEYS[1], 'ok', '1')
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 1
end
redis.call('HINCRBY', KEYS[1], 'gen', 1)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 0

-- configure.lua: give the gate a voucher's definition, as of its revision, atomically with
-- respect to every reservation: remaining becomes total_limit minus the orders held, so R1
-- (remaining + HLEN(orders) = total_limit) holds with the new limit from this step on.
-- KEYS[1] remaining, KEYS[2] users (unused), KEYS[3] orders, KEYS[4] version, KEYS[5] definition
--         (as in reserve.lua); the version is raised when the definition is applied, so the
--         sold-out or paused state published after it is newer than every one before
-- ARGV[1] revision
-- ARGV[2] total_limit
-- ARGV[3] per_user_limit
-- ARGV[4] paused: '1' or '0'
-- ARGV[5] 'newer': apply only a revision above the one held; 'force': whatever is held (the
--         database's definition over a revision the database never committed)
-- ARGV[6] '1': refuse a total_limit below the orders held (in flight included), so that an
--         edit lowering the limit never leaves remaining below 0; '0': apply it anyway
-- The definition is kept also when the voucher is not loaded, so a load that read the database
-- before the edit (load.lua) counts from the newer total_limit.
-- Returns {status, remaining after (0 if not loaded), orders held, revision held before (0: none),
-- loaded (1 or 0)}:
--   status 1 applied; 0 the gate holds this revision or a newer one, nothing changed;
--   -2 refused: total_limit below the orders held, nothing changed
local held_rev = tonumber(redis.call('HGET', KEYS[5], 'rev') or '0')
local held = redis.call('HLEN', KEYS[3])
local remaining = redis.call('GET', KEYS[1])
local loaded = 0
if remaining then
  loaded = 1
end
if ARGV[5] ~= 'force' and held_rev >= tonumber(ARGV[1]) then
  return {0, tonumber(remaining or '0'), held, held_rev, loaded}
end
if ARGV[6] == '1' and remaining and tonumber(ARGV[2]) < held then
  return {-2, tonumber(remaining), held, held_rev, loaded}
end
redis.call('HSET', KEYS[5], 'rev', ARGV[1], 'total', ARGV[2], 'perUser', ARGV[3], 'paused', ARGV[4])
local after = 0
if remaining then
  after = tonumber(ARGV[2]) - held
  redis.call('SET', KEYS[1], after)
end
bump_version()
return {1, after, held, held_rev, loaded}

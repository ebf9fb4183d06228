-- recount.lua: restore R1 from the orders hash: remaining = total_limit - HLEN(orders), and
-- users recounted from the holders, in one atomic step.
-- KEYS[1] remaining, KEYS[2] users, KEYS[3] orders, KEYS[4] version, KEYS[5] definition (as in
-- reserve.lua); the version is raised when remaining changes
-- ARGV[1] total_limit, used only when the gate holds no definition: the definition's total
-- counts, so a recount with an older copy of the voucher cannot undo an edit
-- Returns {remaining before, remaining after, 1 if users changed else 0}, or {0, 0, -1} if
-- the voucher is not loaded.
local before = redis.call('GET', KEYS[1])
if not before then
  return {0, 0, -1}
end
local holders = redis.call('HVALS', KEYS[3])
local counts = {}
for _, h in ipairs(holders) do
  local first = string.find(h, ':', 1, true)
  local customer = string.sub(h, string.find(h, ':', first + 1, true) + 1)
  counts[customer] = (counts[customer] or 0) + 1
end
local changed = 0
local users = redis.call('HGETALL', KEYS[2])
for i = 1, #users, 2 do
  if tonumber(users[i + 1]) ~= counts[users[i]] then
    changed = 1
  end
end
local n = 0
for customer, count in pairs(counts) do
  n = n + 1
end
if n * 2 ~= #users then
  changed = 1
end
if changed == 1 then
  redis.call('DEL', KEYS[2])
  for customer, count in pairs(counts) do
    redis.call('HSET', KEYS[2], customer, count)
  end
end
local total = tonumber(redis.call('HGET', KEYS[5], 'total') or ARGV[1])
local after = total - #holders
redis.call('SET', KEYS[1], after)
if after ~= tonumber(before) then
  bump_version()
end
return {tonumber(before), after, changed}

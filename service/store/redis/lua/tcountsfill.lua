#!lua
-- Sets the tenant counts of some tenants of one partition from the list
-- indexes, for a store written before tenant counts were kept: each
-- tenant's index of a terminal state holds its tasks in that status, its
-- LIVE index its PENDING and IN_FLIGHT ones, the IN_FLIGHT ones being
-- those also in the lease set. One run is atomic, so the counts it sets
-- are exact as of its run; the scripts that write tasks keep them after.
-- KEYS: 1 tenant counts, 2 lease set, then per tenant its 5 list indexes of
--       the tenant scope: LIVE, SUCCEEDED, EXHAUSTED, FAILED, CANCELLED
-- ARGV: the tenants, in the order of their keys
local statuses = {'SUCCEEDED', 'EXHAUSTED', 'FAILED', 'CANCELLED'}
for i, tn in ipairs(ARGV) do
  local base = 3 + 5 * (i - 1)
  local live = redis.call('ZCARD', KEYS[base])
  local leased = redis.call('ZINTERCARD', 2, KEYS[base], KEYS[2])
  local set = {'PENDING:' .. tn, live - leased, 'IN_FLIGHT:' .. tn, leased}
  for j, st in ipairs(statuses) do
    set[#set + 1], set[#set + 2] = st .. ':' .. tn, redis.call('ZCARD', KEYS[base + j])
  end
  redis.call('HSET', KEYS[1], unpack(set))
end
return #ARGV

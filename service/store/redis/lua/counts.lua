-- The task counts, one rule for every script that moves a task between
-- statuses (put before the script by newScripts): count notes each move,
-- apply writes them, one HINCRBY a field that changed. The counts hash has
-- a field per status, the tenant counts hash one per status and tenant
-- ('STATUS:tenant', see tenantCountField).

-- counted[status][tenant] is the change noted.
local counted = {}

local function add(st, tn, d)
  local t = counted[st]
  if not t then
    t = {}
    counted[st] = t
  end
  t[tn] = (t[tn] or 0) + d
end

-- count notes that a task of tenant tn leaves status from for status to;
-- from is nil for a task created, to for one deleted.
local function count(tn, from, to)
  if from then add(from, tn, -1) end
  if to then add(to, tn, 1) end
end

-- apply writes the changes noted to the counts hash and the tenant counts
-- hash.
local function apply(counts, tenants)
  for st, t in pairs(counted) do
    local total = 0
    for tn, n in pairs(t) do
      if n ~= 0 then
        redis.call('HINCRBY', tenants, st .. ':' .. tn, n)
        total = total + n
      end
    end
    if total ~= 0 then
      redis.call('HINCRBY', counts, st, total)
    end
  end
end

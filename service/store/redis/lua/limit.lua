#!lua
-- Takes room for one attempt on a destination (store.Limits, under the
-- rules of package limits): a rate token and a slot in flight, both or
-- neither. Times are the caller's, in microseconds; the server's clock
-- only counts down the keys' lives, which are set relative to the caller's
-- now.
-- KEYS: 1 the key's rate hash (tat, ticket), 2 its slots (name → expiry)
-- ARGV: 1 now, 2 interval (0: no rate limit), 3 tau, 4 max wait,
--       5 max in flight (0: no cap), 6 hold, 7 the new slot's name,
--       8 how long (ms) a key outlives the last moment its state matters
-- Returns {1, at}: granted, the token's time; {0, 1, retryAt}: refused by
-- the rate, with a place in line; {0, 2}: refused for room in flight.
local now, interval, tau = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local maxWait, maxInFlight, hold = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local idle = tonumber(ARGV[8])

-- keep makes key live until idle after the time 'till', never shorter
-- than it already does.
local function keep(key, till)
  local ms = math.ceil((till - now) / 1000) + idle
  if redis.call('PTTL', key) < ms then -- -1, no expiry yet, is less
    redis.call('PEXPIRE', key, ms)
  end
end

local at, tat = now, 0
if interval > 0 then
  local state = redis.call('HMGET', KEYS[1], 'tat', 'ticket')
  tat = math.max(tonumber(state[1]) or now, now)
  if tat - tau - now > maxWait then
    local ticket = math.max(tonumber(state[2]) or now, tat - tau, now) + interval
    redis.call('HSET', KEYS[1], 'ticket', ticket)
    keep(KEYS[1], ticket)
    return {0, 1, ticket}
  end
  at = math.max(tat - tau, now)
end
if maxInFlight > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now) -- a slot counts while now is before its expiry
  if redis.call('ZCARD', KEYS[2]) >= maxInFlight then
    return {0, 2}
  end
  redis.call('ZADD', KEYS[2], now + hold, ARGV[7])
  keep(KEYS[2], now + hold)
end
if interval > 0 then
  redis.call('HSET', KEYS[1], 'tat', tat + interval)
  keep(KEYS[1], tat + interval)
end
return {1, at}

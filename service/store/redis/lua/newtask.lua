-- Writing a task that does not exist yet, one rule for create.lua and
-- createfast.lua (put before them by newScripts, after counts.lua and
-- gather.lua). Both scripts' first six KEYS are a partition's due set,
-- counts, body reference counts, tenant counts, lease set and held hash,
-- and each task's F fields and values start with id, tn, ik, next, seq
-- and br (the body reference, '' for none).

-- newTask writes the task whose hash key is task and whose F fields start
-- at ARGV[f]: its hash, its body reference's count, its 3 LIVE list
-- indexes (the first at KEYS[ix]), and, when lease (ms) is not '0', the
-- lease set and holder's entry in the held hash (it is created claimed),
-- else the due set and a line for the wake notice in wakes.
local function newTask(task, ix, lease, f, nf, holder, wakes)
  local id, tn, next, seq, br = ARGV[f + 1], ARGV[f + 3], ARGV[f + 7], ARGV[f + 9], ARGV[f + 11]
  redis.call('HSET', task, unpack(ARGV, f, f - 1 + 2 * nf))
  if br ~= '' then
    redis.call('HINCRBY', KEYS[3], br, 1)
  end
  if lease ~= '0' then
    gather('ZADD', KEYS[5], lease, id)
    if holder ~= '' then
      gather('HSET', KEYS[6], id, holder)
    end
    count(tn, nil, 'IN_FLIGHT')
  else
    gather('ZADD', KEYS[1], next, id)
    wakes[#wakes + 1] = id .. ' ' .. next .. ' 1'
    count(tn, nil, 'PENDING')
  end
  for j = ix, ix + 2 do
    gather('ZADD', KEYS[j], seq, id)
  end
end

-- created ends a script that wrote tasks with newTask: the gathered
-- writes, the counts, and one PUBLISH on channel of the wakes, if any.
local function created(channel, wakes)
  flush()
  apply(KEYS[2], KEYS[4])
  if #wakes > 0 then
    redis.call('PUBLISH', channel, table.concat(wakes, '\n'))
  end
end

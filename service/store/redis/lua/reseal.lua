#!lua
-- Replaces a task's headers if they are still those read: the condition
-- also keeps a write from making anew the hash of a task purged since it
-- was read (HSET on a missing key would create it).
-- KEYS: 1 the task's hash
-- ARGV: 1 the headers as read (field h), 2 the headers to write
-- Returns 1 when written, 0 when the task is gone or its headers changed.
if redis.call('HGET', KEYS[1], 'h') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'h', ARGV[2])
return 1

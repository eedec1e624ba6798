-- Included by read_body.lua and commit_body.lua (see service/redis/scripts.py): the owner's next
-- entries of `stream` for `consumer` of `group`. Returns {ids, payloads, tail}:
-- payloads[i] is the value of field 'e' when that is the entry's only field (every entry the
-- producer SDK writes), else the entry's flat field list, so the caller can dead-letter it.
-- When nothing is new, tail is the id of the stream's last entry ('0-0' if empty), from which
-- the caller's XREAD waits without missing an entry added in between; else it is ''.
local function next_entries(stream, group, consumer, count)
  local reply = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', count,
    'STREAMS', stream, '>')
  local ids, payloads = {}, {}
  if not reply then
    local last = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)
    return {ids, payloads, last[1] and last[1][1] or '0-0'}
  end
  for i, entry in ipairs(reply[1][2]) do
    local fields = entry[2]
    ids[i] = entry[1]
    if #fields == 2 and fields[1] == 'e' then
      payloads[i] = fields[2]
    else
      payloads[i] = fields
    end
  end
  return {ids, payloads, ''}
end

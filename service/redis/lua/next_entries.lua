-- Included by read_body.lua and commit_body.lua (see service/redis/scripts.py): the owner's next
-- entries of `stream` for `consumer` of `group`. Returns {ids, payloads, tail}:
-- payloads[i] is the value of field 'e' when that is the entry's only field (every entry the
-- producer SDK writes), else the entry's flat field list, so the caller can dead-letter it.
-- When nothing is new, tail is the id of the stream's last entry ('0-0' if empty), from which
-- the caller's XREAD waits without missing an entry added in between; else it is ''.

-- The id of the stream's last entry, '0-0' if it has none.
local function last_id(stream)
  local last = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)
  return last[1] and last[1][1] or '0-0'
end

-- The largest id a stream can hold: nothing can follow it, and XRANGE cannot start after it.
local LAST_POSSIBLE = '18446744073709551615-18446744073709551615'

-- {} {} `seen` if no entry follows `seen`, the last entry the caller read, or was told ends
-- the stream, in its epoch: every entry up to it was delivered to the group, so nothing is new.
-- One empty XRANGE instead of a read's GET, XREADGROUP and XREVRANGE (a third of their cost:
-- at light load most owners of a round read nothing). Nil when `seen` is '' (not known) or an
-- entry follows it.
local function unchanged(stream, seen)
  if not seen or seen == '' then
    return nil
  end
  if seen == LAST_POSSIBLE or #redis.call('XRANGE', stream, '(' .. seen, '+', 'COUNT', 1) == 0 then
    return {{}, {}, seen}
  end
end

local function next_entries(stream, group, consumer, count)
  local reply = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', count,
    'STREAMS', stream, '>')
  local ids, payloads = {}, {}
  if not reply then
    return {ids, payloads, last_id(stream)}
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

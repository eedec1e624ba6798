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

-- {} {} `seen` if the stream still ends at `seen`, the last entry the caller read or was told
-- is the stream's last: every entry up to it was delivered to the group, and later ones can
-- only be appended after it, so nothing is new. One call instead of a read's three: at light
-- load most owners of a round read nothing. Nil when `seen` is '' (not known) or the stream
-- moved on.
local function unchanged(stream, seen)
  if seen and seen ~= '' and last_id(stream) == seen then
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

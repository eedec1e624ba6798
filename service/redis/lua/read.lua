--[[
Read the next batch of a partition's inbound log for its owner, or nothing for anyone else.

Race closed: a plain XREADGROUP (blocking or not) by a worker whose lease has expired moves
entries into that worker's pending list; the new owner, already past its takeover drain, would
never see them, and later events of the same turns would be applied before them. Checking the
lease in the same script as the read fences reads as commits are fenced. Scripts cannot block,
so the caller waits with a plain XREAD (which changes nothing) and then calls this again.

KEYS[1] lease, KEYS[2] inbound stream
ARGV[1] lease value "<worker>:<epoch>", ARGV[2] group, ARGV[3] consumer, ARGV[4] count,
ARGV[5] (optional) the id of the last entry the caller read, or was told ends the stream, in its
        current epoch: if the stream still ends there, the reply is {{}, {}, ARGV[5]} at once
        (`unchanged`), lease or not, since nothing moved
Returns 0 if the lease is not ARGV[1]; else {ids, payloads, tail} as `next_entries` documents.
]]
--!include next_entries
--!include read_body
return read_call(KEYS, ARGV)

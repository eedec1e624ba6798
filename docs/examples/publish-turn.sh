#!/usr/bin/env bash
# Publish one complete turn to terminus with plain Redis commands: no SDK, only redis-cli, as
# docs/contract/asyncapi.json describes the inbound log (channel `inbound`, message
# `InboundEvent`, one field `e` of JSON) and docs/producers.md the rules.
#
#   docs/examples/publish-turn.sh SESSION TURN [PARTITIONS] [PREFIX]
#
# REDIS_CLI_ARGS passes connection options to redis-cli (e.g. "-u redis://host:6379/0").
# Prints the inbound key it wrote to.
set -euo pipefail
session=$1 turn=$2 partitions=${3:-16} prefix=${4:-terminus}

# The partition: CRC-32 (IEEE) of the UTF-8 session id, modulo P. gzip's trailer holds exactly
# that CRC, little-endian, in its first four bytes.
crc=$(printf %s "$session" | gzip -c | tail -c 8 | head -c 4 | od -An -tu4 | tr -d ' \n')
key="$prefix:{$((crc % partitions))}:in"
now=$(date +%s%3N) # the producer's clock: the workers measure reset times against it

# Every event names its turn, step, attempt and seq (contiguous within an attempt, from 0).
event() {
    local ids="\"v\":1,\"session_id\":\"$session\",\"turn_id\":\"$turn\",\"step\":1,\"attempt\":1"
    # shellcheck disable=SC2086  # REDIS_CLI_ARGS is a list of options
    redis-cli ${REDIS_CLI_ARGS:-} XADD "$key" '*' e "{$ids,\"ts_ms\":$now,$1}" >/dev/null
}
event '"type":"turn-started","seq":0'
event '"type":"attempt-started","seq":1,"provider":"shell","model":"none","contract":"ai-sdk"'
event '"type":"text-start","seq":2,"part_id":"a"'
event '"type":"text-delta","seq":3,"part_id":"a","delta":"Hello from redis-cli"'
event '"type":"text-end","seq":4,"part_id":"a"'
# Under the ai-sdk contract a genuine finish is the attempt's terminal proof.
event '"type":"finish-step","seq":5,"finish_reason":"stop","raw_finish_reason":"end_turn","usage":{"output_tokens":4}'
echo "$key"

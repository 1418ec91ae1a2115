#!/bin/bash
# Online resize (docs/OPERATIONS.md): a LUN grows in service through `isergwctl lun resize` and
# through `lun set backstore.size=`, on a file LUN and on a block LUN (a loop device grown and
# measured again). A host that holds a registration and a Write Exclusive - Registrants Only
# reservation keeps both, sees CAPACITY DATA HAS CHANGED (2A/09) once per change and never
# REPORTED LUNS DATA HAS CHANGED or a reset, reads the new size, and writes and reads the new
# range; a second host writes and verifies across the change with zero errors, and every block
# below the old end verifies afterwards. Every refusal answers with its status and error code
# and changes nothing: a shrink without force, sizes that are no size, an unknown key, a ram
# or unknown LUN, measuring a LUN whose size is configured. A forced shrink truncates the file.
# A remote LUN follows its back end: a second gateway serves it (tgtd cannot resize a LUN in
# service), grows it on a reload, and the host of the front gateway sees 2A/09 once and the new
# size, with no request to the front gateway.
#
# About 10 s (15 s under ASan).
#
#   tests/integration/test_resize.sh        (BUILD=build|build/san)
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/api.sh"
. "$(dirname "$0")/../lib/hosts.sh"

t_begin resize
if [ "$TARGET" != isergwd ]; then
	skip resize "online resize is the gateway's own (TARGET=$TARGET)"
	t_end
fi
AGENT=$T_BUILD/isergw-agent
CTL=$T_BUILD/isergwctl
VERIFY=$T_TOOLS/isergw-verify
if [ ! -x "$AGENT" ] || [ ! -x "$CTL" ] || [ ! -x "$VERIFY" ] || [ ! -x "$T_TOOLS/isergw-pr" ]; then
	skip resize "no $AGENT, $CTL, $VERIFY or isergw-pr"
	t_end
fi
if ! t_need curl python3 losetup truncate; then
	skip resize "needs curl, python3, losetup and truncate"
	t_end
fi

IQN=iqn.2026-11.org.isergw:resize
GW_PORT=$(t_free_port)
API_PORT=$(t_free_port)
SOCK=$T_DIR/ctl.sock
STATE=$T_DIR/agent
API_URL=http://$T_HOST:$API_PORT
URL=iscsi://$T_HOST:$GW_PORT/$IQN
IMG=$T_DIR/lun0.img
BIMG=$T_DIR/lun1.img
BE_PORT=$(t_free_port)
BE_IQN=iqn.2026-11.org.isergw:resize-backend
BE_CONF=$T_DIR/backend.json
MiB=1048576

LOOPDEV=
resize_cleanup() {
	[ -n "$LOOPDEV" ] && losetup -d "$LOOPDEV" 2>/dev/null
}
trap 'rc=$?; resize_cleanup; (exit $rc); t_exit_trap' EXIT

truncate -s 8M "$BIMG"
if ! LOOPDEV=$(losetup -f --show "$BIMG" 2>"$T_DIR/losetup.err"); then
	fail "block: loop device" "losetup: $(cat "$T_DIR/losetup.err") (needs root and loop devices)"
	LOOPDEV=
	t_end
fi

# be_config SIZE: the back-end gateway's file, one file LUN of SIZE.
be_config() {
	cat >"$BE_CONF" <<EOC
{ "portals": [ { "name": "tcp0", "transport": "tcp", "address": "$T_HOST", "port": $BE_PORT } ],
  "targets": [ { "name": "$BE_IQN", "allow_any_initiator": true, "portals": [ "tcp0" ],
                 "luns": [ { "lun": 0, "backstore": { "type": "file", "path": "$T_DIR/backend.img", "size": "$1" } } ] } ] }
EOC
}
be_config 16M
if ! gw_start "$BE_CONF" "$T_DIR/backend.log" "$BE_PORT"; then
	fail start "the back-end gateway did not start"
	t_end
fi
BE_PID=$T_GW_PID

cat >"$T_DIR/gateway.json" <<EOC
{ "gateway": { "control_socket": "$SOCK" },
  "portals": [ { "name": "tcp0", "transport": "tcp", "address": "$T_HOST", "port": $GW_PORT } ],
  "targets": [ { "name": "$IQN", "allow_any_initiator": true, "portals": [ "tcp0" ],
                 "luns": [ { "lun": 0, "backstore": { "type": "file", "path": "$IMG", "size": "16M" } },
                           { "lun": 1, "backstore": { "type": "block", "path": "$LOOPDEV" } },
                           { "lun": 2, "backstore": { "type": "ram", "size": "8M" } },
                           { "lun": 3, "backstore": { "type": "remote", "polling_interval": 1,
                             "paths": [ { "url": "iscsi://$T_HOST:$BE_PORT/$BE_IQN/0" } ] } } ] } ] }
EOC
if ! gw_start "$T_DIR/gateway.json" "$T_DIR/gateway.log" "$GW_PORT"; then
	fail start "the gateway did not start"
	t_end
fi
GW_PID=$T_GW_PID
ASAN_OPTIONS="log_path=$T_DIR/san/asan-agent:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
	UBSAN_OPTIONS="log_path=$T_DIR/san/ubsan-agent:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
	t_daemon_start agent agent "$T_DIR/agent.log" "$AGENT" --state-dir "$STATE" \
	--gateway-socket "$SOCK" --listen "$T_HOST:$API_PORT" --backstore-dirs "$T_DIR:/dev"
if ! t_wait_port "$T_LAST_PID" "$API_PORT" 10; then
	fail start "the agent did not start: $(tail -n 3 "$T_DIR/agent.log" | tr '\n' ' ')"
	t_end
fi
ADMIN=$(cat "$STATE/admin.token")
ctl() { "$CTL" --url "$API_URL" --token-file "$STATE/admin.token" "$@"; }

# The agent adopts the gateway's configuration once it is connected.
adopted() { api GET "/api/v1/targets/$IQN/luns/0" && [ "$CODE" = 200 ]; }
check "the agent serves the gateway's LUNs" wait_for 10 adopted

# ---- a host with a reservation, and verified I/O from a second host ---------------------------

HOST_UA=1 host_start a iqn.2026-12.org.isergw:host-a 7 "$URL"
check "host A registers key a1" host_expect a "register a1" "register: good"
check "host A holds Write Exclusive - Registrants Only" host_expect a "reserve a1 5" "reserve: good"
check "host A reads 16 MiB (32768 blocks)" host_expect a capacity "^capacity 32768 512$"

# uas NAME: the unit attentions in host NAME's last answer, one per line.
uas() { grep '^ua ' "$T_DIR/$1.last" | tr '\n' ' '; }

# resized NAME BLOCKS CTL-ARGS...: isergwctl CTL-ARGS succeeds, and host A then sees
# CAPACITY DATA HAS CHANGED once (no reset, no REPORTED LUNS change) and BLOCKS blocks.
resized() {
	local name=$1 blocks=$2
	shift 2
	if ! ctl "$@" >"$T_DIR/ctl.out" 2>&1; then
		fail "$name" "isergwctl $*: $(cat "$T_DIR/ctl.out")"
		return
	fi
	host_do a capacity
	if grep -q "^capacity $blocks 512$" "$T_DIR/a.last" && [ "$(uas a)" = "ua 06/2a/09 " ]; then
		pass "$name: 2A/09 once, then $blocks blocks ($(tr '\n' ' ' <"$T_DIR/ctl.out"))"
	else
		fail "$name" "$(tr '\n' ' ' <"$T_DIR/a.last")"
	fi
}

# Writes and read-backs over the old 16 MiB by a registrant (the reservation lets it write),
# running while the LUN grows: it must see the change as a retried unit attention and nothing
# failing. It starts first and the resize follows its first write.
"$VERIFY" -A -i iqn.2026-12.org.isergw:host-b -K b2 -s 5 -n 8000 -m 131072 -S 16M "$URL/0" \
	>"$T_DIR/verify.out" 2>&1 &
VPID=$!
first_write() { grep -q "first write" "$T_DIR/verify.out" || ! t_alive "$VPID"; }
t_wait_for 30 first_write

if ctl lun resize "$IQN" 0 32M >"$T_DIR/ctl.out" 2>&1 && grep -q "resized in service" "$T_DIR/ctl.out"; then
	pass "isergwctl lun resize $IQN 0 32M: $(cat "$T_DIR/ctl.out")"
else
	fail "isergwctl lun resize" "$(cat "$T_DIR/ctl.out")"
fi
wait "$VPID"
VRC=$?
if [ "$VRC" = 0 ] && grep -q "unit attention 06/2a/09" "$T_DIR/verify.out"; then
	pass "host B's writes and read-backs across the resize: verified, and 2A/09 retried ($(tail -n 1 "$T_DIR/verify.out"))"
else
	fail "verified I/O across the resize" "exit $VRC: $(grep -E "unit attention|verify:" "$T_DIR/verify.out" | tail -n 4 | tr '\n' ' ')"
fi

host_do a capacity
if grep -q "^capacity 65536 512$" "$T_DIR/a.last" && [ "$(uas a)" = "ua 06/2a/09 " ]; then
	pass "host A: CAPACITY DATA HAS CHANGED once, then 65536 blocks (no reset, no REPORTED LUNS change)"
else
	fail "host A after the resize" "$(tr '\n' ' ' <"$T_DIR/a.last")"
fi
check "host A's and host B's keys are still registered" \
	host_expect a read-keys "^keys [0-9]+ .*a1.*b2|^keys [0-9]+ .*b2.*a1"
check "host A's reservation is still there" host_expect a read-reservation "^reservation (0x)?0*a1 5"
check "the new range is writable (LBA 65535)" host_expect a "fill 65535 0x5a" "fill: good"
check "... and reads back" host_expect a "expect 65535 0x5a" "expect: good"
check "the new range is writable (LBA 40000)" host_expect a "fill 40000 0x3c" "fill: good"
check "... and reads back" host_expect a "expect 40000 0x3c" "expect: good"
if "$VERIFY" -V -i iqn.2026-12.org.isergw:host-b -s 5 -n 8000 -m 131072 -S 16M "$URL/0" \
	>"$T_DIR/replay.out" 2>&1; then
	pass "every block below the old end verifies ($(tail -n 1 "$T_DIR/replay.out"))"
else
	fail "old range after the resize" "$(tail -n 3 "$T_DIR/replay.out" | tr '\n' ' ')"
fi
if ! grep -q "removed" "$T_DIR/gateway.log" && grep -q "LUN 0 resized in service" "$T_DIR/gateway.log"; then
	pass "the gateway resized LUN 0 in place (no LU removed)"
else
	fail "resized in place" "$(grep -E "removed|resized" "$T_DIR/gateway.log" | tail -n 3 | tr '\n' ' ')"
fi
check "the file is 32 MiB" [ "$(stat -c %s "$IMG")" = $((32 * MiB)) ]

# The change an operator makes first: lun set with a new size goes the same way.
resized "lun set backstore.size=40M, in service" 81920 lun set "$IQN" 0 backstore.size=40M
check "host A still holds its reservation after lun set" \
	host_expect a read-reservation "^reservation (0x)?0*a1 5"

# ---- refusals: each with its status and code, and nothing changes ------------------------------

RZ=/api/v1/targets/$IQN/luns
api POST "$RZ/0/resize" '{"size": "16M"}'
expect "a shrink without force: 422 apply_failed" 422 apply_failed
check "... saying why" grep -q "shrinking" "$T_DIR/body"
api POST "$RZ/0/resize" '{"size": "abc"}'
expect "a size that is not a size: 422 invalid" 422 invalid
api POST "$RZ/0/resize" '{"size": -5}'
expect "a negative size: 422 invalid" 422 invalid
api POST "$RZ/0/resize" '{"size": 41943140}'
expect "a size that is not whole blocks: 422" 422
check "... saying so" grep -q "multiple" "$T_DIR/body"
api POST "$RZ/0/resize" '{"size": "48M", "bogus": 1}'
expect "an unknown key: 422 invalid" 422 invalid
api POST "$RZ/0/resize" '{"size": "48M", "force": "yes"}'
expect "force that is not a boolean: 422 invalid" 422 invalid
api POST "$RZ/2/resize" '{"size": "16M"}'
expect "a ram LUN: 422 invalid" 422 invalid
api POST "$RZ/9/resize" '{"size": "16M"}'
expect "an unknown LUN: 404 not_found" 404 not_found
api POST "/api/v1/targets/iqn.2026-12.org.isergw:nothing/luns/0/resize" '{"size": "16M"}'
expect "an unknown target: 404 not_found" 404 not_found
api POST "$RZ/0/resize" '{}'
expect "measuring a LUN whose size is configured: 422 apply_failed" 422 apply_failed
host_do a capacity
if grep -q "^capacity 81920 512$" "$T_DIR/a.last" && [ -z "$(uas a)" ]; then
	pass "after the refusals the LUN is unchanged, and the host was told nothing"
else
	fail "unchanged after refusals" "$(tr '\n' ' ' <"$T_DIR/a.last")"
fi
check "the file is still 40 MiB" [ "$(stat -c %s "$IMG")" = $((40 * MiB)) ]

# ---- a forced shrink ----------------------------------------------------------------------

resized "a forced shrink to 24M" 49152 --force lun resize "$IQN" 0 24M
check "the file is truncated to 24 MiB" [ "$(stat -c %s "$IMG")" = $((24 * MiB)) ]
check "host A's reservation survives the shrink" \
	host_expect a read-reservation "^reservation (0x)?0*a1 5"

# ---- a block device grown under the LUN, measured again ------------------------------------

host_do a "lun 1"
check "LUN 1 (the loop device) reads 8 MiB" host_expect a capacity "^capacity 16384 512$"
truncate -s 12M "$BIMG"
t_fault "grow the loop device" losetup -c "$LOOPDEV"
resized "lun resize $IQN 1 (no size): the grown loop device measured again" 24576 \
	lun resize "$IQN" 1
check "... and the CLI says its size" grep -q "12582912 bytes" "$T_DIR/ctl.out"
check "the block LUN's new range is writable" host_expect a "fill 20000 0x77" "fill: good"
check "... and reads back" host_expect a "expect 20000 0x77" "expect: good"

# ---- a remote LUN follows its back end -----------------------------------------------------

host_do a "lun 3"
# host_blocks N: host A's LUN reads N blocks; the unit attentions it met on the way gather in
# $T_DIR/a.uas.
: >"$T_DIR/a.uas"
host_blocks() {
	host_do a capacity && grep '^ua ' "$T_DIR/a.last" >>"$T_DIR/a.uas"
	grep -q "^capacity $1 512$" "$T_DIR/a.last"
}
check "LUN 3 (remote, the back-end gateway's 16 MiB) reads 32768 blocks" t_wait_for 20 host_blocks 32768
: >"$T_DIR/a.uas"	# the first command to LUN 3 met its POWER ON; what counts comes after
be_config 20M
t_fault "reload the back-end gateway with 20M" kill -HUP "$BE_PID"
if t_wait_for 20 host_blocks 40960 && [ "$(tr '\n' ' ' <"$T_DIR/a.uas")" = "ua 06/2a/09 " ]; then
	pass "the back end grew: host A sees 2A/09 once, then 40960 blocks, without a request"
else
	fail "remote LUN after the back end grew" "$(tr '\n' ' ' <"$T_DIR/a.last") uas: $(tr '\n' ' ' <"$T_DIR/a.uas")"
fi
check "the front gateway read the new size because the back end said it changed" \
	grep -q "the back end's size changed.*after the back end's CAPACITY DATA HAS CHANGED" "$T_DIR/gateway.log"
api POST "$RZ/3/resize" '{}'
if [ "$CODE" = 200 ] && [ "$(jget "j['pending']")" = True ] && [ "$(jget "j['size']")" = $((20 * MiB)) ]; then
	pass "resize of a remote LUN without a size: its paths read the capacity again (pending)"
else
	fail "remote LUN measured on request" "HTTP $CODE: $(head -c 200 "$T_DIR/body")"
fi
api POST "$RZ/3/resize" '{"size": "64M"}'
expect "a remote LUN with a size: 422 invalid" 422 invalid

check "host A logs out cleanly" host_stop a
check "the gateway is still running" t_alive "$GW_PID"
t_end

#!/bin/bash
# Hostile HTTP clients against the real agent (driving a real gateway), and the agent's limits.
# Raw sockets (tests/tools/agent-hostile.py) send what curl cannot: broken framing, a 1 MiB
# header line, 10,000 headers, bodies that never end, slowloris connections; curl sends JSON
# bombs, invalid UTF-8 and NULs, query NULs, If-Match garbage, failed tokens from one address,
# and backstore paths out of --backstore-dirs. Each gets a clear 4xx (or its connection closed)
# and changes nothing, while a well-behaved client beside them (127.0.0.1, its own address)
# keeps getting GET /api/v1/health answered, a write through the API still works afterwards,
# and the agent's RSS and open fds stay bounded (figures printed).
#
#   tests/integration/test_agent_hostile.sh        (BUILD=build|build/san)
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/api.sh"

t_begin agent_hostile
if [ "$TARGET" != isergwd ]; then
	skip agent_hostile "the agent drives isergwd only"
	t_end
fi
AGENT=$T_BUILD/isergw-agent
TOOL=$T_ROOT/tests/tools/agent-hostile.py
if [ ! -x "$AGENT" ]; then
	skip agent_hostile "no $AGENT"
	t_end
fi
if ! t_need curl python3; then
	skip agent_hostile "needs curl and python3"
	t_end
fi

IQN=iqn.2026-11.org.isergw:hostile
GW_PORT=$(t_free_port)
API_PORT=$(t_free_port)
SOCK=$T_DIR/ctl.sock
STATE=$T_DIR/agent
URL=http://$T_HOST:$API_PORT
GWCONF=$T_DIR/gateway.json
# The gateway's own file (root's) names a LUN outside --backstore-dirs: never restricted.
ROOTIMG=$T_SHM/root-lun0.img
truncate -s 16M "$ROOTIMG"
REQ_TIMEOUT=5
BACKOFF=4
cat >"$GWCONF" <<EOC
{ "gateway": { "control_socket": "$SOCK" },
  "portals": [ { "name": "tcp0", "transport": "tcp", "address": "$T_HOST", "port": $GW_PORT } ],
  "targets": [ { "name": "$IQN", "portals": ["tcp0"], "allow_any_initiator": true,
                 "luns": [ { "lun": 0, "backstore": { "type": "file", "path": "$ROOTIMG" } } ] } ] }
EOC

in_sync() {
	api GET /api/v1/health "" -
	[ "$(jget "j['gateway']['in_sync']")" = True ]
}

if ! gw_start "$GWCONF" "$T_DIR/gateway.log" "$GW_PORT"; then
	fail start "the gateway did not start"
	t_end
fi
ASAN_OPTIONS="log_path=$T_DIR/san/asan-agent:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
	UBSAN_OPTIONS="log_path=$T_DIR/san/ubsan-agent:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
	t_daemon_start agent agent "$T_DIR/agent.log" \
	"$AGENT" --state-dir "$STATE" --listen "$T_HOST:$API_PORT" --gateway-socket "$SOCK" \
	--webui-dir "" --request-timeout $REQ_TIMEOUT --connection-timeout 30 \
	--max-connections 300 --max-connections-per-ip 40 \
	--auth-fail-max 5 --auth-fail-window 60 --auth-backoff $BACKOFF
AGENT_PID=$T_LAST_PID
if ! t_wait_port "$AGENT_PID" "$API_PORT" 15; then
	fail start "the agent did not start: $(tail -n 5 "$T_DIR/agent.log" | tr '\n' ' ')"
	t_end
fi
ADMIN=$(cat "$STATE/admin.token")
check "the agent adopts the gateway's configuration" wait_for 15 in_sync

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$AGENT_PID/status"; }
nfd() { ls "/proc/$AGENT_PID/fd" | wc -l; }
# Warm up what every request allocates once (caches, the metrics text), then measure.
for i in 1 2 3; do
	api GET /api/v1/targets
	api GET /metrics
done
RSS0=$(rss_kb)
FD0=$(nfd)
t_log "agent before: RSS $RSS0 KiB, $FD0 fds"

# The well-behaved client, from 127.0.0.1 throughout (the attacks come from 127.0.0.2-4).
t_daemon_start watch watch "$T_DIR/watch.log" python3 "$TOOL" watch "$T_HOST" "$API_PORT" \
	"$ADMIN" "$T_DIR/watch.out"
WATCH_PID=$T_LAST_PID

# ---- broken framing, huge headers, bodies that never end (raw sockets) --------------------

# hostile CASE REGEX WHY: the tool's one line for CASE must match REGEX.
hostile() {
	local out
	out=$(timeout -k 5 60 python3 "$TOOL" case "$1" "$T_HOST" "$API_PORT" "$ADMIN" 2>&1)
	if printf '%s\n' "$out" | grep -qE "$2"; then
		pass "$1: $3 ($out)"
	else
		fail "$1" "want /$2/ ($3), got: $out"
	fi
}
hostile no-host 'status=400 ' "HTTP/1.1 without Host: 400"
hostile bad-request-line 'status=400 ' "not HTTP: 400"
hostile bad-version 'status=505 ' "HTTP/7.3: 505 version not supported"
# RFC 9112 2.2 lets a server take a bare LF as a line end; no proxy sits in front to read it
# otherwise. Taken as the request it is, with its token checked.
hostile bare-lf 'status=200 ' "bare LF line ends: read as CRLF"
hostile header-no-colon 'status=400 ' "a header line without a colon: 400"
hostile chunked-bad-size 'status=400 ' "chunked, size not hex: 400"
hostile chunked-huge-size 'status=413 ' "chunked, a 2^80 chunk size: 413"
hostile chunked-size-overrun 'status=400 ' "chunked, more data than the size: 400"
hostile two-content-lengths 'status=400 .*code=bad_request' "two Content-Lengths: 400 (JSON)"
hostile cl-and-chunked 'status=400 .*code=bad_request' \
	"Content-Length and Transfer-Encoding: 400 (JSON)"
hostile cl-short-body 'closed=1' "a body shorter than Content-Length, then EOF: closed"
hostile cl-long-body 'status=422 .*code=invalid' \
	"junk after the body: the framed request answered, the junk not taken as one"
hostile cl-negative 'status=400 ' "Content-Length -5: 400"
hostile cl-not-a-number 'status=400 ' "Content-Length 12abc: 400"
hostile huge-header-line 'status=431 ' "a 1 MiB header line: 431"
hostile many-headers 'status=431 ' "10,000 headers: 431"
hostile huge-url 'status=414 ' "a 1 MiB URL: 414"
# Over --header-max but within what libmicrohttpd reads (twice the limit): the API's JSON.
hostile url-over-limit 'status=414 .*code=uri_too_long' "a 36 KiB URL: 414 (JSON)"
hostile headers-over-limit 'status=431 .*code=headers_too_large' \
	"36 headers of 1 KiB: 431 (JSON)"
hostile body-1gib 'status=413 .*code=too_large' \
	"Content-Length 1 GiB: 413 (JSON) before reading it"
hostile nul-in-method 'status=4[0-9][0-9] ' "a NUL in the method: 4xx"
hostile binary-garbage 'status=400 ' "256 x 64 bytes of binary: 400"
# A body of 1000 bytes trickled a byte a second: cut at --request-timeout.
hostile body-trickle "closed=1 .*secs=([0-9]|1[0-4])\." \
	"a body trickled a byte a second: closed within --request-timeout ($REQ_TIMEOUT s)"

# ---- slowloris: 60 connections from one address, a header byte a second -------------------

out=$(timeout -k 5 60 python3 "$TOOL" slowloris "$T_HOST" "$API_PORT" 127.0.0.2 60 \
	$((REQ_TIMEOUT + 6)))
t_log "  $out"
alive=$(printf '%s' "$out" | sed -n 's/.* alive=\([0-9]*\).*/\1/p')
maxcut=$(printf '%s' "$out" | sed -n 's/.* max_cut_secs=\([0-9]*\).*/\1/p')
early=$(printf '%s' "$out" | sed -n 's/.* early=\([0-9]*\).*/\1/p')
check "slowloris: the 20 over --max-connections-per-ip 40 closed at once (early=$early)" \
	test "${early:-0}" -ge 20 -a "${early:-99}" -le 25
check "and the other 40 cut by --request-timeout $REQ_TIMEOUT s: none left (max ${maxcut:-?} s)" \
	test "${alive:-1}" = 0 -a "${maxcut:-99}" -le $((REQ_TIMEOUT + 3))
check "and the log says why" grep -q "no whole request within $REQ_TIMEOUT s" "$T_DIR/agent.log"

# ---- JSON bombs, huge numbers and strings, invalid UTF-8, NULs (curl) ---------------------

# post NAME STATUS CODE FILE: POST FILE to /api/v1/targets.
post() {
	CODE=$(curl -s -m 30 -o "$T_DIR/body" -D "$T_DIR/hdr" -w '%{http_code}' \
		-H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
		--data-binary "@$4" "$URL/api/v1/targets" 2>/dev/null)
	expect "$1" "$2" "$3"
}
python3 -c "import sys; sys.stdout.write('[' * 100000 + ']' * 100000)" >"$T_DIR/nest.json"
post "100,000 nested arrays: 400 malformed_json" 400 malformed_json "$T_DIR/nest.json"
python3 -c "import sys; sys.stdout.write('{\"a\":' * 100000 + '1' + '}' * 100000)" \
	>"$T_DIR/nest2.json"
post "100,000 nested objects: 400 malformed_json" 400 malformed_json "$T_DIR/nest2.json"
python3 -c "import sys; sys.stdout.write('{\"tpgt\": 1' + '0' * 100000 + '}')" >"$T_DIR/num.json"
post "a 100,000-digit integer: 400 malformed_json" 400 malformed_json "$T_DIR/num.json"
printf '{"tpgt": 1e999999}' >"$T_DIR/real.json"
post "1e999999: 400 malformed_json" 400 malformed_json "$T_DIR/real.json"
python3 -c "import sys; sys.stdout.write('{\"name\": \"' + 'a' * 900000 + '\"}')" \
	>"$T_DIR/str.json"
post "a 900 KB name: 422 naming the field" 422 invalid "$T_DIR/str.json"
check "  the field is name" test "$(jget "j['error']['field']")" = name
printf '{"name": "iqn.2026-11.org.isergw:\xff\xfe", "allow_any_initiator": true}' \
	>"$T_DIR/utf8.json"
post "invalid UTF-8 in a JSON string: 400 malformed_json" 400 malformed_json "$T_DIR/utf8.json"
printf '{"name": "iqn.2026-11.org.isergw:a\\u0000b", "allow_any_initiator": true}' \
	>"$T_DIR/nul.json"
post "an encoded NUL (\\u0000) in a JSON string: 400 malformed_json" 400 malformed_json \
	"$T_DIR/nul.json"
printf '{"name": "iqn.2026-11.org.isergw:a\x01b", "allow_any_initiator": true}' \
	>"$T_DIR/ctl.json"
post "a raw control character in a JSON string: 400 malformed_json" 400 malformed_json \
	"$T_DIR/ctl.json"

# ---- encoded NULs in query values, If-Match garbage --------------------------------------

api GET "/api/v1/targets?x=%00"
expect "GET ?x=%00: 400" 400 bad_request
api GET "/api/v1/targets?x=%ff"
expect "GET ?x=%ff (invalid UTF-8): 400" 400 bad_request
api GET "/api/v1/config?a=%0a"
expect "GET ?a=%0a (a control character): 400" 400 bad_request
api GET /api/v1/config
cp "$T_DIR/body" "$T_DIR/config.json"
GEN=$(sed -n 's/^ETag: "\([0-9]*\)".*/\1/Ip' "$T_DIR/hdr" | tr -d '\r')
api PUT "/api/v1/config?dry_run=true%00false" "$(cat "$T_DIR/config.json")"
expect "PUT /config?dry_run=true%00false: 400 (neither a dry run nor a write)" 400 bad_request
for im in '*junk' 'W/"' '"' ',,,,' "\"$GEN\"x" "$(printf 'a%.0s' $(seq 1 20000))"; do
	IF_MATCH=$im api PUT "/api/v1/targets/$IQN" \
		'{"alias":"hostile","allow_any_initiator":true,"portals":["tcp0"]}'
	expect "If-Match ${im:0:12}$([ ${#im} -gt 12 ] && echo "... (${#im} bytes)"): 412" 412 stale
done
api GET "/api/v1/targets/$IQN"
check "  the target is unchanged (its alias not hostile)" \
	test "$(jget "j['name'] == '$IQN' and j.get('alias') != 'hostile'")" = True
IF_MATCH="\"0\", W/\"$GEN\"" api PUT "/api/v1/targets/$IQN" \
	'{"alias":"listed","allow_any_initiator":true,"portals":["tcp0"]}'
expect "a well-formed If-Match list naming the generation still writes: 200" 200

# ---- failed tokens from one address: 429 with Retry-After, then back ----------------------

# from ADDR TOKEN: GET /api/v1/targets from the source address ADDR; sets CODE.
from() {
	CODE=$(curl -s -m 10 --interface "$1" -o "$T_DIR/body" -D "$T_DIR/hdr" -w '%{http_code}' \
		-H "Authorization: Bearer $2" "$URL/api/v1/targets" 2>/dev/null)
}
codes=
for i in 1 2 3 4 5 6; do
	from 127.0.0.3 "igw_wrong$i"
	codes="$codes $CODE"
done
check "5 wrong tokens from 127.0.0.3: 401 four times, then 429 ($codes)" \
	test "$codes" = " 401 401 401 401 429 429"
from 127.0.0.3 "$ADMIN"
retry=$(sed -n 's/^Retry-After: *\([0-9]*\).*/\1/Ip' "$T_DIR/hdr" | tr -d '\r')
check "then even the admin token from 127.0.0.3 gets 429 rate_limited with Retry-After ($retry)" \
	test "$CODE" = 429 -a "$(jget "j['error']['code']")" = rate_limited -a \
	"${retry:-0}" -ge 1 -a "${retry:-99}" -le $BACKOFF
from 127.0.0.1 "$ADMIN"
check "while 127.0.0.1 with the admin token gets 200" test "$CODE" = 200
check "the log names the address (rate-limited)" grep -q '127.0.0.3: 5 failed tokens.*rate-limited' \
	"$T_DIR/agent.log"
api GET /metrics
check "/metrics counts failed tokens per source" \
	grep -q '^isergw_agent_auth_failures_total{source="127.0.0.3"} 5$' "$T_DIR/body"
check "/metrics counts the 429s per source" \
	grep -q '^isergw_agent_auth_rate_limited_total{source="127.0.0.3"} [1-9]' "$T_DIR/body"
check "/metrics counts the connections cut off" \
	grep -qE '^isergw_agent_requests_cut_total [1-9]' "$T_DIR/body"
sleep $((BACKOFF + 1))
from 127.0.0.3 "$ADMIN"
check "after the back-off ($BACKOFF s) 127.0.0.3 with the admin token gets 200" test "$CODE" = 200

# ---- backstore paths through the API: only in --backstore-dirs ---------------------------

ALLOWED="$STATE, /dev/disk/by-id"
# lun NAME PATH [TYPE]: POST a LUN with that backstore path; 422 naming the field and folders.
lun_refused() {
	api POST "/api/v1/targets/$IQN/luns" \
		"{\"backstore\":{\"type\":\"${3:-file}\",\"path\":\"$2\",\"size\":\"1M\"}}"
	if expect "$1: 422" 422 invalid; then
		check "  names backstore.path and $4" python3 -c "
import json, sys
e = json.load(open(sys.argv[1]))['error']
sys.exit(not (e['field'] == 'backstore.path' and sys.argv[2] in e['message']))" \
			"$T_DIR/body" "$4"
	fi
}
ln -s /etc/shadow "$STATE/shadow.img"
mkdir -p "$STATE/sub"
ln -s /etc "$STATE/sub/etc"
lun_refused "file /etc/shadow" /etc/shadow file "allowed: $ALLOWED"
lun_refused "file STATE/../../etc/shadow" "$STATE/../../etc/shadow" file ". or .."
lun_refused "file STATE/shadow.img (a symlink to /etc/shadow)" "$STATE/shadow.img" file \
	"resolved: /etc/shadow"
lun_refused "file STATE/sub/etc/shadow (a folder symlink out)" "$STATE/sub/etc/shadow" file \
	"allowed: $ALLOWED"
lun_refused "file STATE/admin.token (the agent's own file)" "$STATE/admin.token" file \
	"own files"
lun_refused "block /dev/sda" /dev/sda block "allowed: $ALLOWED"
lun_refused "a relative path" lun.img file "absolute"
api GET "/api/v1/targets/$IQN/luns"
check "  none of them was added (the root's LUN 0 alone)" test "$(jget "len(j['luns'])")" = 1
python3 -c "
import json, sys
c = json.load(open(sys.argv[1]))
c['targets'][0]['luns'].append({'lun': 5, 'backstore': {'type': 'file', 'path': '/etc/passwd'}})
json.dump(c, open(sys.argv[2], 'w'))" "$T_DIR/config.json" "$T_DIR/config-bad.json"
api PUT /api/v1/config "$(cat "$T_DIR/config-bad.json")"
expect "PUT /config adding /etc/passwd: 422" 422 invalid
check "  names targets[0].luns[1].backstore.path" \
	test "$(jget "j['error']['field']")" = "targets[0].luns[1].backstore.path"
api PUT "/api/v1/config?dry_run=true" "$(cat "$T_DIR/config-bad.json")"
expect "the same as a dry run: 422" 422 invalid
api PUT /api/v1/config "$(cat "$T_DIR/config.json")"
expect "PUT /config as exported (root's LUN outside the folders): 200" 200
api POST "/api/v1/targets/$IQN/luns" \
	"{\"lun\":1,\"backstore\":{\"type\":\"file\",\"path\":\"$STATE/lun1.img\",\"size\":\"4M\"}}"
expect "a file in the state folder: 201" 201
check "  the gateway created it (4 MiB)" wait_for 10 test -s "$STATE/lun1.img"

# ---- clients that go away while they wait: event streams, parked requests ----------------

# metric NAME: its value in /metrics ("" when absent).
metric() {
	curl -s -m 10 -H "Authorization: Bearer $ADMIN" "$URL/metrics" 2>/dev/null |
		sed -n "s/^$1 //p"
}
metric_is() { [ "$(metric "$1")" = "$2" ]; }
metric_ge() { local v; v=$(metric "$1"); [ -n "$v" ] && [ "$v" -ge "$2" ]; }
# scrape_has NAME OP VALUE...: one scrape of /metrics (at most a second old: a counter that
# moved proves the rest was read with it) holds every `NAME -OP VALUE` (test's -eq, -ge, -gt).
scrape_has() {
	local v
	curl -s -m 10 -H "Authorization: Bearer $ADMIN" "$URL/metrics" >"$T_DIR/metrics.txt" \
		2>/dev/null || return 1
	while [ $# -ge 3 ]; do
		v=$(sed -n "s/^$1 //p" "$T_DIR/metrics.txt")
		[ -n "$v" ] && [ "$v" "-$2" "$3" ] || return 1
		shift 3
	done
}
GONE0=$(metric isergw_agent_clients_gone_total)
# An event stream idles suspended; its client closing it used to be noticed only at the next
# event or keepalive (15 s), so 40 drops filled --max-connections-per-ip.
out=$(timeout -k 5 300 python3 "$TOOL" events-drop "$T_HOST" "$API_PORT" 127.0.0.4 "$ADMIN" 250)
t_log "  $out"
refused=$(printf '%s' "$out" | sed -n 's/.* refused=\([0-9]*\).*/\1/p')
check "250 event streams opened and dropped one after another from 127.0.0.4: none refused \
(--max-connections-per-ip 40; $out)" test "${refused:-1}" = 0
# A scrape built after the drops (the text is at most a second old) shows them all ended and
# counts them gone (one that an event or keepalive reached first ends on its failed write
# instead, uncounted).
sleep 1.2
check "the agent holds no stale subscriber nor waiting request, and counts the clients gone" \
	wait_for 10 scrape_has isergw_agent_event_subscribers eq 0 \
	isergw_agent_requests_waiting eq 0 isergw_agent_clients_gone_total gt "${GONE0:-0}"
t_log "  isergw_agent_clients_gone_total ${GONE0:-?} -> $(sed -n \
	's/^isergw_agent_clients_gone_total //p' "$T_DIR/metrics.txt")"
curl -s -N -m 60 --interface 127.0.0.4 -H "Authorization: Bearer $ADMIN" \
	"$URL/api/v1/events" >"$T_DIR/events.out" 2>/dev/null &
SUB_PID=$!
check "a new subscriber from 127.0.0.4 gets its hello" \
	wait_for 10 grep -q '^event: hello' "$T_DIR/events.out"
api PUT "/api/v1/targets/$IQN" '{"alias":"events","allow_any_initiator":true,"portals":["tcp0"]}'
expect "a write beside it: 200" 200
check "and the subscriber gets its config event" \
	wait_for 10 grep -q '^event: config' "$T_DIR/events.out"
kill "$SUB_PID" 2>/dev/null
wait "$SUB_PID" 2>/dev/null
check "its curl gone, the agent holds no subscriber" \
	wait_for 10 metric_is isergw_agent_event_subscribers 0
# Streams held open: an address may hold a quarter of --max-connections-per-ip (40 here: 10).
sub_pids=
for i in $(seq 1 10); do
	curl -s -N -m 60 --interface 127.0.0.6 -H "Authorization: Bearer $ADMIN" \
		"$URL/api/v1/events" >"$T_DIR/held.$i" 2>/dev/null &
	sub_pids="$sub_pids $!"
done
check "10 event streams held open from 127.0.0.6" \
	wait_for 10 metric_is isergw_agent_event_subscribers 10
CODE=$(curl -s -m 10 --interface 127.0.0.6 -o "$T_DIR/body" -w '%{http_code}' \
	-H "Authorization: Bearer $ADMIN" "$URL/api/v1/events" 2>/dev/null)
expect "the 11th from that address: 429 rate_limited (JSON)" 429 rate_limited
check "  naming the limit" grep -q 'max-connections-per-ip' "$T_DIR/body"
CODE=$(curl -s -m 10 --interface 127.0.0.6 -o "$T_DIR/body" -w '%{http_code}' \
	-H "Authorization: Bearer $ADMIN" "$URL/api/v1/targets" 2>/dev/null)
check "while REST calls from 127.0.0.6 are still answered ($CODE)" test "$CODE" = 200
kill $sub_pids 2>/dev/null
wait $sub_pids 2>/dev/null
check "their curls gone, the agent holds no subscriber" \
	wait_for 10 metric_is isergw_agent_event_subscribers 0

# Requests parked on purpose: the gateway stopped (SIGSTOP), a write waits for its apply and
# the writes after it wait their turn. Well under the agent's 30 s gateway call timeout.
GONE0=$(metric isergw_agent_clients_gone_total)
t_fault "SIGSTOP to the gateway" kill -STOP "$T_GW_PID"
check "the gateway is stopped (state T)" t_wait_for 5 t_sigstopped "$T_GW_PID"
curl -s -m 90 -o "$T_DIR/w1.body" -w '%{http_code}' -X PUT -H "Authorization: Bearer $ADMIN" \
	-H 'Content-Type: application/json' \
	--data '{"alias":"first","allow_any_initiator":true,"portals":["tcp0"]}' \
	"$URL/api/v1/targets/$IQN" >"$T_DIR/w1.code" 2>/dev/null &
W1_PID=$!
check "a write waits for the stopped gateway" wait_for 10 metric_is isergw_agent_requests_waiting 1
pids=
for i in $(seq 1 20); do
	timeout -k 5 60 python3 "$TOOL" wait-gone "$T_HOST" "$API_PORT" 127.0.0.5 "$ADMIN" PUT \
		"/api/v1/targets/$IQN" '{"alias":"gone","allow_any_initiator":true,"portals":["tcp0"]}' \
		reset 0 >"$T_DIR/gone.$i" 2>&1 &
	pids="$pids $!"
done
timeout -k 5 60 python3 "$TOOL" wait-gone "$T_HOST" "$API_PORT" 127.0.0.5 "$ADMIN" GET \
	/api/v1/sessions '' reset 0 >"$T_DIR/gone.s" 2>&1 &
pids="$pids $!"
wait $pids
n=$(cat "$T_DIR"/gone.[0-9]* | grep -c 'how=reset status=None$')
check "20 writes waiting their turn, each reset by its client while it waited ($n)" test "$n" = 20
check "  and a GET /sessions waiting for the gateway, reset too" \
	grep -q 'how=reset status=None$' "$T_DIR/gone.s"
check "the 20 writes left the queue at once, counted as gone (+21; waiting: the first write \
and the GET)" wait_for 10 scrape_has isergw_agent_clients_gone_total ge $((${GONE0:-0} + 21)) \
	isergw_agent_requests_waiting eq 2
# A client that half-closes after its request (legal) while it waits: libmicrohttpd itself
# closes such a connection unanswered when it resumes it, so it counts as gone at once.
timeout -k 5 90 python3 "$TOOL" wait-gone "$T_HOST" "$API_PORT" 127.0.0.5 "$ADMIN" GET \
	/api/v1/sessions '' half 60 >"$T_DIR/half.out" 2>&1 &
HALF_PID=$!
check "a GET /sessions half-closed while it waits for the gateway counts as gone (+22)" \
	wait_for 10 metric_ge isergw_agent_clients_gone_total $((${GONE0:-0} + 22))
t_fault "SIGCONT to the gateway" kill -CONT "$T_GW_PID"
wait "$W1_PID"
check "the gateway back, the first write gets its answer ($(cat "$T_DIR/w1.code"))" \
	test "$(cat "$T_DIR/w1.code")" = 200
wait "$HALF_PID"
check "  the half-closed one is closed unanswered, as libmicrohttpd does ($(cat "$T_DIR/half.out"))" \
	grep -q 'how=half status=None$' "$T_DIR/half.out"
out=$(timeout -k 5 60 python3 "$TOOL" wait-gone "$T_HOST" "$API_PORT" 127.0.0.5 "$ADMIN" GET \
	/api/v1/targets '' half 20)
check "a half-closed GET /targets, answered without waiting, gets its answer ($out)" \
	test "$out" = "wait-gone how=half status=200"
check "nothing waits any more (the reset GET ended with its gateway answer)" \
	wait_for 10 metric_is isergw_agent_requests_waiting 0
api GET "/api/v1/targets/$IQN"
check "none of the gone writes ran (the alias is the first write's)" \
	test "$(jget "j.get('alias')")" = first

# ---- afterwards: the agent answers writes, its memory and fds are bounded ----------------

api POST "/api/v1/targets/$IQN/luns" '{"lun":2,"backstore":{"type":"ram","size":"4M"}}'
expect "a write through the API after all of it: 201" 201
check "the gateway applied it" grep -qi '^X-Isergw-Gateway: applied' "$T_DIR/hdr"
t_stop_pid "$WATCH_PID" 10
read -r wline <"$T_DIR/watch.out" 2>/dev/null || wline="no result"
t_log "  well-behaved client: $wline"
ok=$(printf '%s' "$wline" | sed -n 's/.*ok=\([0-9]*\).*/\1/p')
bad=$(printf '%s' "$wline" | sed -n 's/.*failed=\([0-9]*\).*/\1/p')
worst=$(printf '%s' "$wline" | sed -n 's/.*max_ms=\([0-9]*\).*/\1/p')
check "the well-behaved client was answered every time (200 within 5 s: $wline)" \
	test "${ok:-0}" -ge 20 -a "${bad:-1}" = 0 -a "${worst:-99999}" -lt 5000
# Connections the attacks opened are gone once their timeouts pass.
settled() { [ "$(nfd)" -le $((FD0 + 4)) ]; }
wait_for 40 settled
RSS1=$(rss_kb)
FD1=$(nfd)
t_log "agent after: RSS $RSS1 KiB (before $RSS0), $FD1 fds (before $FD0)"
check "RSS bounded: $RSS0 -> $RSS1 KiB (at most +64 MiB)" test "$RSS1" -le $((RSS0 + 65536))
check "fds bounded: $FD0 -> $FD1 (at most +4)" test "$FD1" -le $((FD0 + 4))
check "the agent is alive" t_alive "$AGENT_PID"
t_stop_checked "$AGENT_PID" agent && pass "agent-stop (exit 0 on SIGTERM, no sanitizer report)"
t_end

#!/bin/bash
# The REST agent against the real gateway: every endpoint round-trips (curl and isergwctl),
# provisioning through the API makes a LUN libiscsi's tools read and write, a table of bad
# requests gets the documented status and error body and changes nothing, the gateway is
# reconciled after it restarts, and kill -9 of the agent during a loop of writes leaves the
# configuration at the last acknowledged version.
#
#   tests/integration/test_agent.sh        (BUILD=build|build/san)
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/api.sh"

t_begin agent
if [ "$TARGET" != isergwd ]; then
	skip agent "the agent drives isergwd only"
	t_end
fi
AGENT=$T_BUILD/isergw-agent
CTL=$T_BUILD/isergwctl
if [ ! -x "$AGENT" ] || [ ! -x "$CTL" ]; then
	skip agent "no $AGENT or $CTL"
	t_end
fi
if ! t_need curl python3 iscsi-inq iscsi-readcapacity16; then
	skip agent "needs curl, python3 and libiscsi-bin"
	t_end
fi

IQN=iqn.2026-11.org.isergw:agent
IQN2=iqn.2026-11.org.isergw:agent2
GW_PORT=$(t_free_port)
GW_PORT2=$(t_free_port)
GW_PORT3=$(t_free_port)
API_PORT=$(t_free_port)
SOCK=$T_DIR/ctl.sock
STATE=$T_DIR/agent
URL=http://$T_HOST:$API_PORT
GWCONF=$T_DIR/gateway.json

cat >"$GWCONF" <<EOC
{ "gateway": { "control_socket": "$SOCK" },
  "portals": [ { "name": "tcp0", "transport": "tcp", "address": "$T_HOST", "port": $GW_PORT } ],
  "targets": [] }
EOC

# ---- helpers ------------------------------------------------------------------------------

etag() {
	sed -n 's/^ETag: "\([0-9]*\)".*/\1/Ip' "$T_DIR/hdr" | tr -d '\r'
}

generation() {
	local saved=$CODE
	api GET /api/v1/config
	etag
	CODE=$saved
}

agent_start() {
	ASAN_OPTIONS="log_path=$T_DIR/san/asan-agent:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
		t_daemon_start agent agent "$T_DIR/agent.$1.log" \
		"$AGENT" --state-dir "$STATE" --listen "$T_HOST:$API_PORT" --gateway-socket "$SOCK" \
		--body-max 65536 --backstore-dirs "$T_SHM"
	AGENT_PID=$T_LAST_PID
	t_wait_port "$AGENT_PID" "$API_PORT" 10
}

in_sync() {
	api GET /api/v1/health "" -
	[ "$(jget "j['gateway']['in_sync']")" = True ]
}

# ---- start --------------------------------------------------------------------------------

if ! gw_start "$GWCONF" "$T_DIR/gateway.log" "$GW_PORT"; then
	fail start "the gateway did not start"
	t_end
fi
READ=$("$AGENT" --state-dir "$STATE" --add-token monitor --role read 2>"$T_DIR/addtoken.err")
if ! agent_start 1; then
	fail start "the agent did not start"
	tail -n 20 "$T_DIR/agent.1.log"
	t_end
fi
ADMIN=$(cat "$STATE/admin.token")
check "first start writes a 0600 admin token" \
	test "$(stat -c %a "$STATE/admin.token")" = 600 -a -n "$ADMIN" -a -n "$READ"
check "agent adopts the gateway's configuration and is in sync" wait_for 10 in_sync

# ---- every endpoint round-trips -----------------------------------------------------------

api GET /api/v1/health "" -
expect "GET health without a token" 200
api GET /api/v1/openapi.json "" -
expect "GET openapi.json without a token" 200
n=$(jget "sum(len(v) for v in j['paths'].values())")
check "openapi.json documents every route (>= 30 operations)" test "${n:-0}" -ge 30
# docs/openapi.json and its rendering docs/API.md are what the agent serves (make docs).
cp "$T_DIR/body" "$T_DIR/openapi.json"
check "docs/openapi.json is the document the agent serves (else: make docs)" python3 -c "
import json, sys
sys.exit(json.load(open(sys.argv[1])) != json.load(open(sys.argv[2])))" \
	"$T_DIR/openapi.json" "$T_ROOT/docs/openapi.json"
check "docs/API.md renders it (else: make docs)" bash -c \
	"python3 '$T_ROOT/docs/render-api.py' '$T_DIR/openapi.json' | cmp -s - '$T_ROOT/docs/API.md'"
api GET /api/v1/version "" "$READ"
expect "GET version (read token)" 200

api GET /api/v1/portals
expect "GET portals" 200
check "the adopted portal is listed" test "$(jget "j['portals'][0]['name']")" = tcp0
api POST /api/v1/portals "{\"name\":\"tcp1\",\"address\":\"$T_HOST\",\"port\":$GW_PORT2}"
expect "POST portal" 201
check "the gateway listens on the new portal" wait_for 5 t_port_open "$T_HOST" "$GW_PORT2"
api PUT /api/v1/portals/tcp1 "{\"address\":\"$T_HOST\",\"port\":$GW_PORT3}"
expect "PUT portal (new port)" 200
check "the changed portal moved" wait_for 5 t_port_open "$T_HOST" "$GW_PORT3"
# Closed while the gateway lives and serves the new port: a dead gateway closes every port.
old_port_closed() {
	! t_port_open "$T_HOST" "$GW_PORT2" && t_alive "$T_GW_PID" && t_port_open "$T_HOST" "$GW_PORT3"
}
check "the old port is closed, the gateway still up on the new one" wait_for 5 old_port_closed
api GET /api/v1/portals/tcp1
expect "GET portal" 200

api POST /api/v1/targets "{\"name\":\"$IQN\",\"alias\":\"agent\",\"allow_any_initiator\":true}"
expect "POST target" 201
check "Location names the target" grep -qi "^Location: /api/v1/targets/$IQN" "$T_DIR/hdr"
api GET /api/v1/targets/$IQN
expect "GET target" 200
check "portals default to every portal" test "$(jget "len(j['portals'])")" = 2
api PUT /api/v1/targets/$IQN "{\"alias\":\"renamed\",\"allow_any_initiator\":true,\"portals\":[\"tcp0\"]}"
expect "PUT target" 200
api GET /api/v1/targets
expect "GET targets" 200
check "the list shows the new alias" test "$(jget "j['targets'][0]['alias']")" = renamed

LUNIMG=$T_SHM/agent-lun0.img
api POST /api/v1/targets/$IQN/luns "{\"backstore\":{\"type\":\"file\",\"path\":\"$LUNIMG\",\"size\":\"64M\"},\"product\":\"agentlun\"}"
expect "POST lun" 201
check "the first LUN gets number 0" test "$(jget "j['lun']")" = 0
api GET /api/v1/targets/$IQN/luns/0
expect "GET lun" 200
api GET /api/v1/targets/$IQN/luns
expect "GET luns" 200
LURL=iscsi://$T_HOST:$GW_PORT/$IQN/0
check "iscsi-inq sees the provisioned LUN" bash -c "iscsi-inq '$LURL' | grep -q 'agentlun'"
check "iscsi-readcapacity16 sees 64 MiB" bash -c \
	"iscsi-readcapacity16 '$LURL' | grep -q 'LOGICAL BLOCK ADDRESS:131071'"
if [ -x "$T_TOOLS/isergw-verify" ]; then
	check "isergw-verify writes and reads the LUN" "$T_TOOLS/isergw-verify" -q -n 40 \
		-S 16777216 "$LURL"
else
	skip "isergw-verify" "not built"
fi
api POST /api/v1/targets/$IQN/luns "{\"lun\":1,\"backstore\":{\"type\":\"ram\",\"size\":\"8M\"}}"
expect "POST a second LUN while sessions may run" 201
api PUT /api/v1/targets/$IQN/luns/1 "{\"backstore\":{\"type\":\"ram\",\"size\":\"16M\"}}"
expect "PUT lun (resize ram LUN)" 200
check "the resized LUN reports 16 MiB" wait_for 5 bash -c \
	"iscsi-readcapacity16 'iscsi://$T_HOST:$GW_PORT/$IQN/1' | grep -q 'LOGICAL BLOCK ADDRESS:32767'"
api DELETE /api/v1/targets/$IQN/luns/1
expect "DELETE lun" 204
check "the deleted LUN is gone (LOGICAL UNIT NOT SUPPORTED)" wait_for 5 \
	t_refused "$T_SENSE_NO_LUN" iscsi-readcapacity16 "iscsi://$T_HOST:$GW_PORT/$IQN/1"

# ACLs with CHAP and mutual CHAP; secrets are write-only.
SECRET=agent-secret-0123
MSECRET=gw-mutual-secret-9
api POST /api/v1/targets/$IQN/acls "{\"name\":\"$T_INI1\",\"chap\":{\"user\":\"host1\",\"secret\":\"$SECRET\",\"mutual_user\":\"gw1\",\"mutual_secret\":\"$MSECRET\"}}"
expect "POST acl with mutual CHAP" 201
api GET /api/v1/targets/$IQN/acls/$T_INI1
expect "GET acl" 200
check "GET shows the secret masked" test "$(jget "j['chap']['secret']")" = '****'
api PUT /api/v1/targets/$IQN "{\"alias\":\"renamed\",\"allow_any_initiator\":false,\"portals\":[\"tcp0\"]}"
expect "PUT target: only listed initiators" 200
if [ -x "$T_TOOLS/isergw-verify" ]; then
	check "the ACL'd initiator logs in with mutual CHAP" "$T_TOOLS/isergw-verify" -q -n 4 \
		-S 1048576 -i "$T_INI1" -u host1 -p "$SECRET" -U gw1 -P "$MSECRET" -N "$LURL"
	check "a wrong secret is refused (login status 0x0201)" t_refused "$T_LOGIN_AUTH" \
		"$T_TOOLS/isergw-verify" -q -n 1 -S 1048576 -i "$T_INI1" -u host1 \
		-p wrong-secret-000 -U gw1 -P "$MSECRET" -N "$LURL"
	check "an initiator without ACL is refused (login status 0x0202)" t_refused \
		"$T_LOGIN_AUTHZ" "$T_TOOLS/isergw-verify" -q -n 1 -S 1048576 -i "$T_INI2" -N "$LURL"
fi
api GET /api/v1/targets/$IQN/acls
expect "GET acls" 200
api GET /api/v1/config
expect "GET config (export)" 200
cp "$T_DIR/body" "$T_DIR/export.json"
check "the export masks every secret" bash -c "! grep -q -e '$SECRET' -e '$MSECRET' '$T_DIR/export.json'"
G=$(etag)
IF_MATCH=$G api PUT /api/v1/config "$(cat "$T_DIR/export.json")"
expect "PUT config: the masked export imports with If-Match" 200
if [ -x "$T_TOOLS/isergw-verify" ]; then
	check "secrets survived the masked import" "$T_TOOLS/isergw-verify" -q -n 2 -S 1048576 \
		-i "$T_INI1" -u host1 -p "$SECRET" -U gw1 -P "$MSECRET" -N "$LURL"
fi
api PUT /api/v1/targets/$IQN/acls/$T_INI1 "{\"chap\":{\"user\":\"host1\",\"secret\":\"****\",\"mutual_user\":\"\",\"mutual_secret\":\"\"}}"
expect "PUT acl (keep secret, drop mutual)" 200
api POST /api/v1/targets/$IQN/acls "{\"name\":\"$T_INI2\"}"
expect "POST acl without CHAP" 201
api DELETE /api/v1/targets/$IQN/acls/$T_INI2
expect "DELETE acl" 204

api GET /api/v1/discovery
expect "GET discovery" 200
api PUT /api/v1/discovery '{"auth":"chap","chap":{"user":"disc","secret":"discovery-secret1"}}'
expect "PUT discovery (CHAP)" 200
api PUT /api/v1/discovery '{"auth":"none"}'
expect "PUT discovery (none)" 200

# Sessions: a held session (iscsi-perf) is listed, dropped, and the drop is seen.
api PUT /api/v1/targets/$IQN "{\"alias\":\"renamed\",\"allow_any_initiator\":true,\"portals\":[\"tcp0\"]}"
if t_need iscsi-perf; then
	# Its own process group: iscsi-perf signals its whole group when it stops.
	setsid iscsi-perf -i "$T_INI2" -t 8 "$LURL" >"$T_DIR/perf.out" 2>&1 </dev/null &
	PERF=$!
	has_session() {
		api GET /api/v1/sessions
		[ "$(jget "len([s for s in j['sessions'] if s['initiator']=='$T_INI2'])")" -ge 1 ]
	}
	check "GET sessions lists the running initiator" wait_for 10 has_session
	TSIH=$(jget "[s['tsih'] for s in j['sessions'] if s['initiator']=='$T_INI2'][0]")
	api GET /metrics "" "$READ"
	expect "GET /metrics (read token)" 200
	# /metrics follows the gateway state poll and may be up to a second old (docs/REST.md).
	metrics_have_session() {
		api GET /metrics "" "$READ"
		grep -q "isergw_sessions{target=\"$IQN\",transport=\"tcp\"} [1-9]" "$T_DIR/body"
	}
	check "metrics count the session" wait_for 5 metrics_have_session
	check "metrics count LUN writes" grep -Eq "isergw_lun_write_ops_total\\{target=\"$IQN\",lun=\"0\"\\} [1-9]" "$T_DIR/body"
	api DELETE /api/v1/sessions/$TSIH
	expect "DELETE session" 204
	gone() {
		api GET /api/v1/sessions
		[ "$(jget "len([s for s in j['sessions'] if s['tsih']==$TSIH])")" = 0 ]
	}
	check "the dropped session is gone" wait_for 5 gone
	# SIGKILL: iscsi-perf's own handler signals its process group, and after a dropped
	# session it may sit in libiscsi's reconnect rather than end at -t.
	kill -KILL "$PERF" 2>/dev/null
	wait "$PERF" 2>/dev/null
else
	skip sessions "no iscsi-perf"
fi
api DELETE /api/v1/sessions/65000
expect "DELETE unknown session" 404 not_found

# Events: a change shows up on the stream.
curl -s -N -H "Authorization: Bearer $READ" "$URL/api/v1/events" >"$T_DIR/events.out" 2>&1 &
EV=$!
# The change is made once the stream said hello (it is subscribed), and the stream is read
# until the change arrives: waits on what happened, not on a time.
check "the event stream says hello" t_wait_for 10 grep -q '^event: hello' "$T_DIR/events.out"
api PUT /api/v1/targets/$IQN "{\"alias\":\"evented\",\"allow_any_initiator\":true,\"portals\":[\"tcp0\"]}"
check "the event stream reports the change" \
	t_wait_for 10 grep -q '^event: config' "$T_DIR/events.out"
kill "$EV" 2>/dev/null
wait "$EV" 2>/dev/null

# ---- the CLI ------------------------------------------------------------------------------

cli() { "$CTL" --url "$URL" --state-dir "$STATE" "$@"; }
check "isergwctl health" cli health
check "isergwctl target list shows the target" bash -c "'$CTL' --url '$URL' --state-dir '$STATE' target list | grep -q '$IQN'"
check "isergwctl --json lun list is JSON" bash -c "'$CTL' --url '$URL' --state-dir '$STATE' --json lun list '$IQN' | python3 -m json.tool"
check "isergwctl creates and deletes a target" bash -c "'$CTL' --url '$URL' --state-dir '$STATE' target create '$IQN2' && '$CTL' --url '$URL' --state-dir '$STATE' lun create '$IQN2' backstore.type=null backstore.size=1G && '$CTL' --url '$URL' --state-dir '$STATE' target delete '$IQN2'"
check "isergwctl set keeps the other settings" bash -c "'$CTL' --url '$URL' --state-dir '$STATE' target set '$IQN' alias=cli && '$CTL' --url '$URL' --state-dir '$STATE' --json target show '$IQN' | grep -q '\"lun\": 0'"
check "isergwctl config export | validate" bash -c "'$CTL' --url '$URL' --state-dir '$STATE' config export '$T_DIR/cli-export.json' && '$CTL' --url '$URL' --state-dir '$STATE' config validate '$T_DIR/cli-export.json'"
cli raw GET /api/v1/targets/iqn.2026-11.org.isergw:nope >/dev/null 2>&1
check "isergwctl exit 1 on an API error" test $? = 1
cli --token-file /dev/null target list >/dev/null 2>&1
check "isergwctl exit 1 without a valid token" test $? = 1
"$CTL" --url "http://$T_HOST:1" health >/dev/null 2>&1
check "isergwctl exit 3 when the agent is unreachable" test $? = 3
cli frobnicate >/dev/null 2>&1
check "isergwctl exit 2 on bad usage" test $? = 2
ISERGW_TOKEN=$READ "$CTL" --url "$URL" target delete "$IQN" >/dev/null 2>&1
check "isergwctl with a read-only token from ISERGW_TOKEN cannot delete" test $? = 1

# ---- bad requests: documented status and body, nothing changes ----------------------------

BIG=$T_DIR/big.json
python3 -c "print('{\"name\": \"' + 'a' * 100000 + '\"}')" >"$BIG"
G0=$(generation)
bad() {
	local name=$1 want=$2 code=$3 m=$4 p=$5 body=${6:-} tok=${7:-$ADMIN}
	api "$m" "$p" "$body" "$tok"
	if expect "bad request: $name" "$want" "$code"; then
		if [ "$(jget "'message' in j['error']")" != True ]; then
			fail "bad request: $name" "error body has no message"
		fi
	fi
	local g
	g=$(generation)
	[ "$g" = "$G0" ] || fail "bad request: $name" "generation moved $G0 -> $g"
}
bad "malformed JSON" 400 malformed_json POST /api/v1/targets '{"name": '
bad "body is not an object" 422 invalid POST /api/v1/targets '[1,2]'
bad "wrong type" 422 invalid POST /api/v1/targets "{\"name\":\"$IQN2\",\"tpgt\":\"one\"}"
api POST /api/v1/targets "{\"name\":\"$IQN2\",\"tpgt\":\"one\"}"
check "the error names the field" test "$(jget "j['error']['field']")" = tpgt
bad "unknown field" 422 invalid POST /api/v1/portals '{"name":"p9","bogus":1}'
bad "invalid IQN" 422 invalid POST /api/v1/targets '{"name":"IQN.Not-Valid"}'
bad "invalid initiator IQN" 422 invalid POST /api/v1/targets/$IQN/acls '{"name":"host1"}'
bad "every error at once" 422 invalid POST /api/v1/targets/$IQN/luns '{"lun":7,"vendor":"much-too-long-vendor","backstore":{"type":"floppy"}}'
api POST /api/v1/targets/$IQN/luns '{"lun":7,"vendor":"much-too-long-vendor","backstore":{"type":"floppy"}}'
check "  ... lists both errors" test "$(jget "len(j['errors'])")" -ge 2
bad "oversize body" 413 too_large POST /api/v1/targets "$(cat "$BIG")"
bad "duplicate target" 409 exists POST /api/v1/targets "{\"name\":\"$IQN\"}"
bad "duplicate LUN" 409 exists POST /api/v1/targets/$IQN/luns '{"lun":0,"backstore":{"type":"null","size":"1G"}}'
bad "portal still in use" 409 in_use DELETE /api/v1/portals/tcp0
IF_MATCH=1 bad "stale If-Match" 412 stale PUT /api/v1/targets/$IQN "{\"alias\":\"x\",\"portals\":[\"tcp0\"]}"
bad "missing token" 401 unauthorized GET /api/v1/targets "" -
bad "unknown token" 401 unauthorized GET /api/v1/targets "" igw_00
bad "read-only token writes" 403 forbidden POST /api/v1/targets "{\"name\":\"$IQN2\"}" "$READ"
bad "read-only token drops a session" 403 forbidden DELETE /api/v1/sessions/1 "" "$READ"
bad "unknown endpoint" 404 not_found GET /api/v1/nothing
bad "unknown target" 404 not_found GET /api/v1/targets/$IQN2
bad "method not allowed" 405 method_not_allowed PATCH /api/v1/targets
bad "LUN not a number" 400 bad_request GET /api/v1/targets/$IQN/luns/zero
bad "dry-run import with errors" 422 invalid PUT "/api/v1/config?dry_run=true" '{"portals":[{"name":"a","port":0}],"targets":[{"name":"bad"}]}'
api GET /api/v1/config
cp "$T_DIR/body" "$T_DIR/export2.json"
api PUT "/api/v1/config?dry_run=true" "$(cat "$T_DIR/export2.json")"
expect "dry-run import of the current (masked) export" 200
check "  ... changes nothing" test "$(generation)" = "$G0"
# The control socket is the gateway's own start-up setting: the API cannot move it (an admin
# token pointing the gateway elsewhere), and an import that leaves it out keeps it.
python3 -c "
import json, sys
j = json.load(open('$T_DIR/export2.json'))
j.setdefault('gateway', {})['control_socket'] = '/tmp/elsewhere.sock'
json.dump(j, open('$T_DIR/moved.json', 'w'))
del j['gateway']
json.dump(j, open('$T_DIR/nogw.json', 'w'))
"
api PUT /api/v1/config "$(cat "$T_DIR/moved.json")"
expect "import moving gateway.control_socket" 422 invalid
check "  ... the error names the key and the file" grep -q 'control_socket is set in the gateway' "$T_DIR/body"
check "  ... and stores nothing" test "$(generation)" = "$G0"
bad "validating it says the same" 422 invalid POST /api/v1/config/validate "$(cat "$T_DIR/moved.json")"
api PUT /api/v1/config "$(cat "$T_DIR/nogw.json")"
expect "import without a gateway section" 200
api GET /api/v1/config
check "  ... keeps the control socket" test "$(jget "j['gateway']['control_socket']")" = "$SOCK"
G0=$(generation)

# ---- the gateway restarts: the agent reconciles it ----------------------------------------

gw_stop "$T_GW_PID"
check "health shows the gateway unreachable" wait_for 5 bash -c \
	"curl -s '$URL/api/v1/health' | grep -q '\"connected\": false'"
api GET /api/v1/sessions
expect "GET sessions without a gateway" 503 gateway_unavailable
api PUT /api/v1/targets/$IQN "{\"alias\":\"offline\",\"allow_any_initiator\":true,\"portals\":[\"tcp0\"]}"
expect "writes are stored while the gateway is away" 200
check "  ... and say so" grep -qi "^X-Isergw-Gateway: unreachable" "$T_DIR/hdr"
if gw_start "$GWCONF" "$T_DIR/gateway.2.log" "$GW_PORT"; then
	check "the restarted gateway is reconciled" wait_for 10 in_sync
	check "the LUN is back after the restart" wait_for 10 bash -c "iscsi-inq '$LURL' | grep -q agentlun"
else
	fail "gateway restart" "did not start"
fi

# ---- kill -9 during a loop of writes ------------------------------------------------------

: >"$T_DIR/acked"
writer() {
	local i code
	for i in $(seq 1 400); do
		echo "$i" >"$T_DIR/sent"
		code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H "Authorization: Bearer $ADMIN" \
			--data-binary "{\"alias\":\"w$i\",\"allow_any_initiator\":true,\"portals\":[\"tcp0\"]}" \
			"$URL/api/v1/targets/$IQN" 2>/dev/null)
		[ "$code" = 200 ] && echo "$i" >>"$T_DIR/acked"
		[ "$code" = 000 ] && break
	done
}
writer &
WRITER=$!
# The kill lands mid-loop: after the first acknowledged write (under load the first PUT alone
# can take a second), then a random 0.3-1.1 s more.
wait_for 30 test -s "$T_DIR/acked"
sleep "0.$((RANDOM % 9 + 3))"
t_fault "SIGKILL to the agent" kill -KILL "$AGENT_PID"
wait "$WRITER" 2>/dev/null
t_stop_pid "$AGENT_PID" 1
check "the agent died of the SIGKILL (status $T_STOP_RC)" test "$T_STOP_RC" = 137
LAST=$(tail -n 1 "$T_DIR/acked")
SENT=$(cat "$T_DIR/sent")
check "writes were acknowledged before the kill" test -n "$LAST"
if agent_start 2; then
	api GET /api/v1/targets/$IQN
	ALIAS=$(jget "j['alias']")
	if [ "$ALIAS" = "w$LAST" ] || { [ "$SENT" != "$LAST" ] && [ "$ALIAS" = "w$SENT" ]; }; then
		pass "after kill -9 the stored alias is the last acknowledged write ($ALIAS; acked w$LAST, in flight w$SENT)"
	else
		fail "kill -9" "stored alias $ALIAS, last acknowledged w$LAST, in flight w$SENT"
	fi
	check "the stored configuration parses" python3 -m json.tool "$STATE/config.json"
	api GET /api/v1/config
	cp "$T_DIR/body" "$T_DIR/after-kill.json"
	api POST /api/v1/config/validate "$(cat "$T_DIR/after-kill.json")"
	expect "the stored configuration validates" 200
	check "the restarted agent reconciles the gateway" wait_for 10 in_sync
else
	fail "agent restart" "did not start after kill -9"
fi
check "no secret in the agent logs" bash -c "! grep -q -e '$SECRET' -e '$MSECRET' -e '$ADMIN' '$T_DIR'/agent.*.log"

t_end

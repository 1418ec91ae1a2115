#!/bin/bash
# etcd done right (docs/CLUSTER.md, "etcd"): cluster agents against real etcd servers on
# loopback, without gateways (the agent's side is what is tested here; test_cluster.sh and
# test_fencing.sh drive gateways).
#  - The watch: a change made through one agent reaches another within seconds, far below the
#    safety list's 30 s, and the status says the watch runs.
#  - A slow etcd (every byte 2.5 s late, tests/lib/etcd_relay.py) and then a held one (10 s of
#    black hole): GET /api/v1/targets and /api/v1/health keep answering within 2 s each, the
#    cluster status says etcd is degraded, a change is refused with 503 in bounded time, and
#    all comes back once etcd answers again.
#  - TLS: etcd with a server certificate and --client-cert-auth (a CA and certificates made
#    here with openssl); the agent's first endpoint is dead, it fails over to the TLS one, says
#    which it uses, and a change commits through it.
#  - Bad input, each detected and reported in the log and the cluster status, nothing lost: a
#    certificate that does not verify (another CA), an endpoint that is a web server and not
#    etcd, a prefix that another cluster took over (refused at start; seen by the watch of a
#    running agent, which then stops writing there).
#
#   tests/integration/test_etcd.sh        (BUILD=build|build/san)
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/api.sh"

t_begin etcd
if [ "$TARGET" != isergwd ]; then
	skip etcd "the cluster is made of isergwd gateways and agents"
	t_end
fi
AGENT=$T_BUILD/isergw-agent
if [ ! -x "$AGENT" ]; then
	skip etcd "no $AGENT (make test-build)"
	t_end
fi
if ! t_need etcd curl python3 openssl; then
	skip etcd "needs etcd (Debian package etcd-server), curl, python3 and openssl"
	t_end
fi

TTL=3
P1=/isergw/etcd-$$-a
P2=/isergw/etcd-$$-b
P3=/isergw/etcd-$$-c
P4=/isergw/etcd-$$-d
ETCD_PORT=$(t_free_port)
ETCD_PEER=$(t_free_port)
TLS_PORT=$(t_free_port)
TLS_PEER=$(t_free_port)
RELAY_PORT=$(t_free_port)
DEAD_PORT=$(t_free_port)
WEB_PORT=$(t_free_port)
ETCD_URL=http://$T_HOST:$ETCD_PORT
TLS_URL=https://$T_HOST:$TLS_PORT
CUT=$T_DIR/cut
DELAY=$T_DIR/delay

# ---- helpers ------------------------------------------------------------------------------

# etcd_up NAME CLIENT_URL PEER_PORT [ARGS...]: sets ETCD_PID.
etcd_up() {
	local name=$1 url=$2 peer=$3
	shift 3
	t_daemon_start "etcd-$name" etcd "$T_DIR/etcd-$name.log" \
		etcd --name "isergw-$name" --data-dir "$T_DIR/etcd-$name" \
		--listen-client-urls "$url" --advertise-client-urls "$url" \
		--listen-peer-urls "http://$T_HOST:$peer" \
		--initial-advertise-peer-urls "http://$T_HOST:$peer" \
		--initial-cluster "isergw-$name=http://$T_HOST:$peer" "$@"
	ETCD_PID=$T_LAST_PID
}

# agent_up NAME API_PORT ENDPOINTS PREFIX GROUP [ARGS...]: sets AG_PID; tokens in TOK_NAME.
agent_up() {
	local name=$1 port=$2 eps=$3 prefix=$4 group=$5
	shift 5
	ASAN_OPTIONS="log_path=$T_DIR/san/asan-agent-$name:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
		UBSAN_OPTIONS="log_path=$T_DIR/san/ubsan-agent-$name:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
		t_daemon_start "agent-$name" agent "$T_DIR/agent-$name.$(date +%s%N).log" \
		"$AGENT" --state-dir "$T_DIR/agent-$name" --listen "$T_HOST:$port" --store etcd \
		--etcd-endpoints "$eps" --cluster-prefix "$prefix" --gateway-id "gw-$name" \
		--port-group "$group" --lease-ttl "$TTL" --backstore-dirs "$T_SHM" "$@"
	AG_PID=$T_LAST_PID
	t_wait_port "$AG_PID" "$port" 15
}

# on NAME PORT METHOD PATH [BODY]: an API call to that agent (sets CODE, $T_DIR/body).
on() {
	local name=$1 port=$2
	shift 2
	API_URL=http://$T_HOST:$port ADMIN=$(cat "$T_DIR/agent-$name/admin.token") api "$@"
}

# portal_body NAME PORT: a portal (no gateway runs here: portals are the simplest change).
portal_body() {
	printf '{"name":"%s","transport":"tcp","address":"%s","port":%s}' "$1" "$T_HOST" "$2"
}

# portals_are NAME PORT LIST: the agent's portals, by name, sorted, are LIST ("['a', 'b']").
portals_are() {
	on "$1" "$2" GET /api/v1/portals
	[ "$CODE" = 200 ] && [ "$(jget "sorted(p['name'] for p in (j['portals'] if isinstance(j, dict) else j))")" = "$3" ]
}

# status_is NAME PORT EXPR: the python expression over j (GET /cluster) is true.
status_is() {
	on "$1" "$2" GET /api/v1/cluster
	[ "$CODE" = 200 ] && [ "$(jget "bool($3)")" = True ]
}

# ms_get NAME PORT PATH: prints the milliseconds a GET took (curl's own count: the exchange,
# not the time a loaded machine takes to start curl), "fail" unless it answered 200.
ms_get() {
	local out tok
	tok=$(cat "$T_DIR/agent-$1/admin.token")
	out=$(curl -s -m 10 -o /dev/null -w '%{http_code} %{time_total}' \
		-H "Authorization: Bearer $tok" "http://$T_HOST:$2$3" 2>/dev/null)
	if [ "${out%% *}" = 200 ]; then
		awk -v t="${out#* }" 'BEGIN { printf "%d\n", t * 1000 }'
	else
		echo fail
	fi
}

# poll_api NAME PORT SECONDS: GETs /targets and /health for that long; prints the slowest (ms),
# or "fail" when one did not answer 200.
poll_api() {
	local end=$((SECONDS + $3)) worst=0 ms p
	while [ "$SECONDS" -lt "$end" ]; do
		for p in /api/v1/targets /api/v1/health; do
			ms=$(ms_get "$1" "$2" "$p")
			if [ "$ms" = fail ]; then echo fail; return; fi
			[ "$ms" -gt "$worst" ] && worst=$ms
		done
		sleep 0.3
	done
	echo "$worst"
}

# ---- etcd, a relay in front of it, two agents ----------------------------------------------

etcd_up plain "$ETCD_URL" "$ETCD_PEER"
if ! t_wait_port "$ETCD_PID" "$ETCD_PORT" 20 ||
	! wait_for 20 curl -sf -X POST "$ETCD_URL/v3/kv/range" -d '{"key":"AA=="}'; then
	fail start "etcd did not start"
	t_end
fi
t_daemon_start relay relay "$T_DIR/relay.log" \
	python3 "$T_ROOT/tests/lib/etcd_relay.py" "$RELAY_PORT" "$ETCD_PORT" "$CUT" "$DELAY"
if ! t_wait_port "$T_LAST_PID" "$RELAY_PORT" 10; then
	fail start "the etcd relay did not start"
	t_end
fi
API_A=$(t_free_port)
API_B=$(t_free_port)
if ! agent_up A "$API_A" "http://$T_HOST:$RELAY_PORT" "$P1" 1; then
	fail start "agent A did not start"
	t_end
fi
AG_A=$AG_PID
if ! agent_up B "$API_B" "$ETCD_URL" "$P1" 2; then
	fail start "agent B did not start"
	t_end
fi
AG_B=$AG_PID

check "agent A (through the relay) sees both members, etcd ok, its watch running" \
	wait_for 15 status_is A "$API_A" "sorted(j['members']) == ['gw-A', 'gw-B'] and j['etcd_state'] == 'ok' and j['watching']"
# The safety list runs every 30 s: a change seen within 10 s came through the watch.
on B "$API_B" POST /api/v1/portals "$(portal_body p1 3261)"
expect "a portal created through agent B" 201
a_has_target() {
	portals_are A "$API_A" "['p1']"
}
check "agent A lists it within 10 s (the watch, not the 30 s safety list)" \
	wait_for 10 a_has_target

# ---- a slow etcd, then a held one: the REST API does not wait ----------------------------

echo 2500 >"$DELAY"
worst=$(poll_api A "$API_A" 8)
check "etcd 2.5 s late each way: GET /targets and /health answer within 2 s (slowest ${worst} ms)" \
	bash -c "[ '$worst' != fail ] && [ '$worst' -lt 2000 ]"
check "etcd late: the cluster status says etcd is degraded" \
	wait_for 10 status_is A "$API_A" "j['etcd_state'] == 'degraded'"
rm -f "$DELAY"
check "etcd on time again: the status says ok" \
	wait_for 20 status_is A "$API_A" "j['etcd_state'] == 'ok' and j['watching']"

touch "$CUT"
HELD_AT=$SECONDS
worst=$(poll_api A "$API_A" 10)
check "etcd held for 10 s: GET /targets and /health answer within 2 s (slowest ${worst} ms)" \
	bash -c "[ '$worst' != fail ] && [ '$worst' -lt 2000 ]"
check "etcd held: the cluster status says etcd is degraded" \
	status_is A "$API_A" "j['etcd_state'] == 'degraded' and not j['etcd_reachable']"
t0=$(date +%s%N)
on A "$API_A" POST /api/v1/portals "$(portal_body p-held 3262)"
ms=$((($(date +%s%N) - t0) / 1000000))
expect "etcd held: a change is refused (503) in ${ms} ms" 503 store_unavailable
check "etcd held: agent A logged it degraded" grep -q 'etcd is degraded' "$T_DIR"/agent-A.*.log
rm -f "$CUT"
check "etcd back: agent A is ok again and watching ($((SECONDS - HELD_AT)) s after the hold began)" \
	wait_for 20 status_is A "$API_A" "j['etcd_state'] == 'ok' and j['watching'] and sorted(j['members']) == ['gw-A', 'gw-B']"
on A "$API_A" POST /api/v1/portals "$(portal_body p2 3263)"
expect "etcd back: a change through agent A commits" 201
b_has_both() {
	portals_are B "$API_B" "['p1', 'p2']"
}
check "and agent B sees it (nothing of the refused one)" wait_for 10 b_has_both

# ---- TLS with client certificates; a dead first endpoint --------------------------------

PKI=$T_DIR/pki
mkdir -p "$PKI"
mkcert() {	# mkcert NAME CA_NAME SUBJECT [SAN]
	openssl req -new -newkey rsa:2048 -nodes -keyout "$PKI/$1.key" -subj "/CN=$3" \
		-out "$PKI/$1.csr" 2>/dev/null &&
		openssl x509 -req -in "$PKI/$1.csr" -CA "$PKI/$2.pem" -CAkey "$PKI/$2.key" \
			-CAcreateserial -days 2 -out "$PKI/$1.pem" \
			${4:+-extfile <(printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$4")} \
			2>/dev/null
}
mkca() {
	openssl req -x509 -new -newkey rsa:2048 -nodes -keyout "$PKI/$1.key" -subj "/CN=$1" \
		-days 2 -out "$PKI/$1.pem" 2>/dev/null
}
if mkca ca && mkca otherca && mkcert server ca "$T_HOST" "IP:$T_HOST" &&
	mkcert client ca gw-client "DNS:gw-client" && mkcert stranger otherca gw-stranger "DNS:gw-stranger"; then
	pass "a CA, etcd's certificate and client certificates (openssl)"
else
	fail "pki" "openssl could not make the certificates"
fi
etcd_up tls "$TLS_URL" "$TLS_PEER" --cert-file "$PKI/server.pem" --key-file "$PKI/server.key" \
	--trusted-ca-file "$PKI/ca.pem" --client-cert-auth
TLS_PID=$ETCD_PID
tls_range() {
	curl -sf --cacert "$PKI/ca.pem" --cert "$PKI/client.pem" --key "$PKI/client.key" \
		-X POST "$TLS_URL/v3/kv/range" -d '{"key":"AA=="}'
}
check "etcd answers over TLS with a client certificate" wait_for 20 tls_range
# curl words the refusal differently with each TLS version and timing; etcd's log names it.
if curl -s -m 10 --cacert "$PKI/ca.pem" -X POST "$TLS_URL/v3/kv/range" -d '{"key":"AA=="}' \
	>"$T_DIR/nocert.out" 2>&1; then
	fail "etcd refuses a client without a certificate" "it answered: $(head -c 200 "$T_DIR/nocert.out")"
else
	check "etcd refuses a client without a certificate (and logs why)" \
		wait_for 10 grep -q "client didn't provide a certificate" "$T_DIR/etcd-tls.log"
fi

API_C=$(t_free_port)
if agent_up C "$API_C" "http://$T_HOST:$DEAD_PORT,$TLS_URL" "$P2" 1 --etcd-ca "$PKI/ca.pem" \
	--etcd-cert "$PKI/client.pem" --etcd-key "$PKI/client.key"; then
	pass "agent C starts (endpoints: a dead one, then etcd over TLS)"
else
	fail "agent C" "$(tail -n 5 "$T_DIR"/agent-C.*.log | tr '\n' ' ')"
fi
check "agent C joins through the second endpoint over TLS and says it uses it" \
	wait_for 20 status_is C "$API_C" "j['members'].keys() == {'gw-C'} and j['etcd_state'] == 'ok' and j['etcd']['endpoint'] == '$TLS_URL' and j['etcd']['tls']"
check "its status names the dead endpoint and why" \
	status_is C "$API_C" "j['etcd']['endpoints'][0]['state'] == 'failing' and 'cannot reach' in j['etcd']['endpoints'][0]['error']"
on C "$API_C" POST /api/v1/portals "$(portal_body p-tls 3264)"
expect "a change through agent C commits over TLS" 201
tls_stored() {
	curl -sf --cacert "$PKI/ca.pem" --cert "$PKI/client.pem" --key "$PKI/client.key" \
		-X POST "$TLS_URL/v3/kv/range" \
		-d "{\"key\":\"$(printf '%s' "$P2/config" | base64 -w0)\"}" >"$T_DIR/tls-config.json" &&
		python3 -c "import json,base64,sys; v=json.loads(base64.b64decode(json.load(open(sys.argv[1]))['kvs'][0]['value'])); sys.exit('p-tls' not in [p['name'] for p in v['config']['portals']])" "$T_DIR/tls-config.json"
}
check "etcd holds it (read back over TLS)" tls_stored

# ---- bad input ----------------------------------------------------------------------------

# A certificate that does not verify: the agent trusts another CA than the one that signed
# etcd's certificate.
API_D=$(t_free_port)
agent_up D "$API_D" "$TLS_URL" "$P2" 2 --etcd-ca "$PKI/otherca.pem" \
	--etcd-cert "$PKI/stranger.pem" --etcd-key "$PKI/stranger.key"
check "wrong CA: agent D reports a TLS failure in its cluster status" \
	wait_for 15 status_is D "$API_D" "j['etcd_state'] == 'degraded' and 'TLS failed' in j['etcd']['endpoints'][0]['error']"
check "wrong CA: and in its log" grep -q "$TLS_URL: TLS failed" "$T_DIR"/agent-D.*.log
on D "$API_D" GET /api/v1/cluster
t_log "  agent D: $(jget "j['etcd']['endpoints'][0]['error']")"
check "wrong CA: agent D wrote nothing (gw-D is no member)" \
	status_is C "$API_C" "j['members'].keys() == {'gw-C'} and 'gw-D' not in j['groups']"

# An endpoint that is a web server, not etcd.
mkdir -p "$T_DIR/www"
echo '<html><body>a web site</body></html>' >"$T_DIR/www/index.html"
t_daemon_start web relay "$T_DIR/web.log" python3 -m http.server --bind "$T_HOST" \
	--directory "$T_DIR/www" "$WEB_PORT"
t_wait_port "$T_LAST_PID" "$WEB_PORT" 10
API_E=$(t_free_port)
agent_up E "$API_E" "http://$T_HOST:$WEB_PORT" "$P2" 3
check "not etcd: agent E reports the endpoint is not etcd's v3 JSON gateway (status)" \
	wait_for 15 status_is E "$API_E" "j['etcd_state'] == 'degraded' and \"not etcd's v3 JSON gateway\" in j['etcd']['endpoints'][0]['error']"
check "not etcd: and in its log" grep -q "not etcd's v3 JSON gateway" "$T_DIR"/agent-E.*.log
on E "$API_E" GET /api/v1/cluster
t_log "  agent E: $(jget "j['etcd']['endpoints'][0]['error']")"
on E "$API_E" POST /api/v1/portals "$(portal_body p-web 3265)"
expect "not etcd: a change is refused (503)" 503 store_unavailable

# A prefix another cluster took over, seen at start: agent F joins P3 (recording its cluster
# id), stops; P3 is wiped and another cluster's agent G starts there; F is refused at start.
API_F=$(t_free_port)
API_G=$(t_free_port)
agent_up F "$API_F" "$ETCD_URL" "$P3" 1
AG_F=$AG_PID
check "agent F joins $P3 and records the cluster's id" \
	wait_for 15 test -s "$T_DIR/agent-F/cluster-id"
on F "$API_F" POST /api/v1/portals "$(portal_body p-f 3266)"
expect "a portal through agent F" 201
t_stop_pid "$AG_F" 10
curl -sf -X POST "$ETCD_URL/v3/kv/deleterange" -d "{\"key\":\"$(printf '%s' "$P3/" | base64 -w0)\",\"range_end\":\"$(printf '%s' "$P3"0 | base64 -w0)\"}" >/dev/null
agent_up G "$API_G" "$ETCD_URL" "$P3" 2
check "another cluster's agent G starts on the wiped $P3" \
	wait_for 15 status_is G "$API_G" "j['members'].keys() == {'gw-G'} and j['cluster_id']"
on G "$API_G" POST /api/v1/portals "$(portal_body p-g 3267)"
expect "a portal through agent G" 201
on G "$API_G" GET /api/v1/health
GEN_G=$(jget "j['generation']")
"$AGENT" --state-dir "$T_DIR/agent-F" --listen "$T_HOST:$API_F" --store etcd \
	--etcd-endpoints "$ETCD_URL" --cluster-prefix "$P3" --gateway-id gw-F --port-group 1 \
	--lease-ttl "$TTL" >"$T_DIR/agent-F.restart.log" 2>&1 &
FPID=$!
for i in $(seq 1 100); do t_alive "$FPID" || break; sleep 0.1; done
if t_alive "$FPID"; then kill "$FPID"; fi
wait "$FPID" 2>/dev/null
frc=$?
check "agent F is refused at start: the prefix belongs to another cluster (exit $frc)" \
	bash -c "[ '$frc' != 0 ] && grep -q 'belongs to cluster .*, but this gateway joined cluster' '$T_DIR/agent-F.restart.log'"
t_log "  $(grep -o 'the prefix .*' "$T_DIR/agent-F.restart.log" | head -n 1 | cut -c1-200)"
g_intact() {
	portals_are G "$API_G" "['p-g']" || return 1
	on G "$API_G" GET /api/v1/health
	[ "$(jget "j['generation']")" = "$GEN_G" ]
}
check "nothing lost: cluster G's configuration is as it was" g_intact
check "nothing lost: gw-F did not join cluster G" \
	status_is G "$API_G" "j['members'].keys() == {'gw-G'} and 'gw-F' not in j['groups']"

# The same seen by the watch of a running agent: P4's cluster id changes under agent H.
API_H=$(t_free_port)
agent_up H "$API_H" "$ETCD_URL" "$P4" 1
check "agent H joins $P4" wait_for 15 status_is H "$API_H" "j['members'].keys() == {'gw-H'} and j['cluster_id'] and j['watching']"
curl -sf -X POST "$ETCD_URL/v3/kv/put" -d "{\"key\":\"$(printf '%s' "$P4/cluster_id" | base64 -w0)\",\"value\":\"$(printf 'another-cluster' | base64 -w0)\"}" >/dev/null
check "another cluster's id under $P4: agent H refuses it (status)" \
	wait_for 10 status_is H "$API_H" "j['etcd_state'] == 'refused' and 'belongs to cluster another-cluster' in j['error']"
check "and logs it" grep -q 'belongs to cluster another-cluster' "$T_DIR"/agent-H.*.log
on H "$API_H" POST /api/v1/portals "$(portal_body p-h 3268)"
expect "a change through agent H is refused (503)" 503 store_unavailable
check "the refusal names the reason" grep -q "another cluster" "$T_DIR/body"
on H "$API_H" GET /api/v1/targets
expect "reads through agent H still work" 200
h_left() {
	curl -sf -X POST "$ETCD_URL/v3/kv/range" -d "{\"key\":\"$(printf '%s' "$P4/members/" | base64 -w0)\",\"range_end\":\"$(printf '%s' "$P4/members0" | base64 -w0)\"}" >"$T_DIR/p4.json" &&
		python3 -c "import json,sys; sys.exit(len(json.load(open(sys.argv[1])).get('kvs', [])) != 0)" "$T_DIR/p4.json"
}
check "agent H left the other cluster's member list (its lease revoked)" wait_for 10 h_left

t_end

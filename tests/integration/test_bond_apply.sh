#!/bin/bash
# PUT /api/v1/bonds/{bond}?apply=true / ?dry_run=true on the host, where the kernel cannot make
# bonds: every refusal and every bad input must come before netlink, so they are all proved
# here against a sysfs fixture (ISERGW_SYSFS) describing bonds and bare interfaces. The
# bonds' present settings come from the gateway's network model of that fixture, which the
# agent holds through the control socket; the agent lists the fixture's links itself and
# reads addresses and routes from rtnetlink. Without the gateway apply and dry runs are
# refused (503). Each refusal: the status, the error code, the reason in the message, and
# nothing changed (no networkd file, no desired stored, no interface). Dry runs: the ordered
# steps and the files' text. The default route's interface is refused inside a network
# namespace of the test's own, where it makes that route. A bond carrying a live TCP session
# of the gateway is refused unless force=true. The apply itself runs in the VM guest
# (tests/vm/guest/suite-bond-apply.sh).
#
#   tests/integration/test_bond_apply.sh        (BUILD=build|build/san)
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/api.sh"

t_begin bond_apply
AGENT=$T_BUILD/isergw-agent
if [ ! -x "$AGENT" ]; then
	skip bond_apply "no $AGENT"
	t_end
fi
if ! t_need curl python3 ip unshare nsenter; then
	skip bond_apply "needs curl, python3, ip, unshare and nsenter"
	t_end
fi
if [ ! -x "$T_BUILD/isergwd" ]; then
	skip bond_apply "no $T_BUILD/isergwd"
	t_end
fi

API_PORT=$(t_free_port)
STATE=$T_DIR/agent
URL=http://$T_HOST:$API_PORT
ND=$T_DIR/networkd
mkdir -p "$ND"

# ---- the fixture --------------------------------------------------------------------------
# bd1: active-backup over bd1a, up; bd2 over bd2a; va, vb bare and up; eth7 a plain NIC; lo
# (which carries the agent's 127.0.0.1); dr0, which carries the default route in the test's
# network namespace below. Built aside and moved in at once, so the gateway (re-reading it
# every second) never models half of it.
SYS=$T_DIR/sys
NEW=$T_DIR/sys.new
mkdir -p "$SYS"
put() { mkdir -p "$(dirname "$NEW/$1")" && printf '%s\n' "$2" >"$NEW/$1"; }
nic() { put "class/net/$1/flags" "${2:-0x1003}"; put "class/net/$1/address" 02:00:00:00:00:01; }
bond() {	# bond NAME MODE FOM MIIMON SLAVES...
	local b=$1 mode=$2 fom=$3 mii=$4 s
	shift 4
	nic "$b"
	put "class/net/$b/bonding/mode" "$mode"
	put "class/net/$b/bonding/fail_over_mac" "$fom"
	put "class/net/$b/bonding/miimon" "$mii"
	put "class/net/$b/bonding/num_grat_arp" 1
	put "class/net/$b/bonding/primary" ""
	put "class/net/$b/bonding/slaves" "$*"
	for s in "$@"; do
		nic "$s"
		ln -s "../$b" "$NEW/class/net/$s/master"
	done
}
bond bd1 "active-backup 1" "none 0" 0 bd1a
bond bd2 "active-backup 1" "active 1" 100 bd2a
nic va
nic vb
nic eth7
nic lo 0x9
nic dr0

# The gateway reads the fixture (and the agent lists its links); the agent takes the bonds'
# settings from the gateway's model over the control socket.
export ISERGW_SYSFS=$SYS
IQN=iqn.2026-11.org.isergw:bond-apply
GW_PORT=$(t_free_port)
SOCK=$T_DIR/ctl.sock
cat >"$T_DIR/gateway.json" <<EOC
{ "gateway": { "control_socket": "$SOCK" },
  "portals": [ { "name": "tcp0", "transport": "tcp", "address": "$T_HOST", "port": $GW_PORT } ],
  "targets": [ { "name": "$IQN", "allow_any_initiator": true, "portals": [ "tcp0" ],
                 "luns": [ { "lun": 0, "backstore": { "type": "ram", "size": "16M" } } ] } ] }
EOC

# agent_start TAG NETWORKD_DIR: the agent on the gateway's socket (behind AGENT_WRAP, when
# set); AGENT_PID. AGENT_PORT_WAIT=0 skips the wait for its port (another namespace).
agent_start() {
	ASAN_OPTIONS="log_path=$T_DIR/san/asan-agent:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
		UBSAN_OPTIONS="log_path=$T_DIR/san/ubsan-agent:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
		t_daemon_start agent agent "$T_DIR/agent.$1.log" \
		${AGENT_WRAP[@]+"${AGENT_WRAP[@]}"} "$AGENT" --state-dir "$STATE" \
		--listen "$T_HOST:$API_PORT" --networkd-dir "$2" --gateway-socket "$SOCK"
	AGENT_PID=$T_LAST_PID
	[ "${AGENT_PORT_WAIT:-1}" = 0 ] && return 0
	if ! t_wait_port "$AGENT_PID" "$API_PORT" 10; then
		fail start "the agent did not start"
		tail -n 20 "$T_DIR/agent.$1.log"
		t_end
	fi
}
agent_stop() {
	t_stop_pid "$AGENT_PID" 10
	[ "$T_STOP_RC" -eq 0 ] && [ "$T_STOP_KILLED" = 0 ] ||
		fail "agent-stop" "status $T_STOP_RC, killed $T_STOP_KILLED"
}
# model_has BOND...: the agent shows each bond from the gateway's model (GET answers its
# mode, which only the model gives).
model_has() {
	local b
	for b in "$@"; do
		api GET "/api/v1/bonds/$b"
		[ "$CODE" = 200 ] && [ "$(jget "j.get('mode')")" = active-backup ] || return 1
	done
}

# ---- without the gateway ------------------------------------------------------------------
# The agent has no model: it cannot know what a bond runs now, so it plans nothing.
agent_start 0 "$ND"
ADMIN=$(cat "$STATE/admin.token")
api PUT "/api/v1/bonds/bdn?apply=true" '{"slaves":["va","vb"]}'
refused_nogw() {
	if [ "$CODE" != 503 ] || [ "$(jget "j['error']['code']")" != gateway_unavailable ]; then
		fail "$1" "HTTP $CODE, want 503 gateway_unavailable: $(head -c 300 "$T_DIR/body")"
	elif ! jget "j['error']['message']" | grep -q "the gateway's network model is not available: .* needs the gateway running"; then
		fail "$1" "message does not say so: $(jget "j['error']['message']")"
	else
		pass "$1 ($(jget "j['error']['message']"))"
	fi
}
refused_nogw "without the gateway, apply is refused (503)"
api PUT "/api/v1/bonds/bd1?dry_run=true" '{"miimon":100,"slaves":["bd1a"]}'
refused_nogw "  ... and a dry run too"
check "  ... nothing written to the networkd folder" test -z "$(ls -A "$ND")"
api GET /api/v1/bonds/bdn
check "  ... and no desired settings stored" test "$CODE" = 404
agent_stop

mv "$NEW/class" "$SYS/class"
if ! gw_start "$T_DIR/gateway.json" "$T_DIR/gateway.log" "$GW_PORT"; then
	fail start "the gateway did not start"
	t_end
fi
agent_start 1 "$ND"
check "the agent shows the gateway's model of bd1 and bd2" wait_for 20 model_has bd1 bd2

# nothing_changed NAME BOND: no networkd file, no desired settings stored, no such interface.
nothing_changed() {
	local files
	files=$(ls -A "$ND")
	api GET "/api/v1/bonds/$2"
	if [ -n "$files" ]; then
		fail "$1: nothing changed" "files written: $files"
	elif [ "$(jget "j.get('desired')")" != None ] && [ "$CODE" != 404 ]; then
		fail "$1: nothing changed" "desired stored: $(head -c 200 "$T_DIR/body")"
	elif ip link show "$2" >/dev/null 2>&1; then
		fail "$1: nothing changed" "interface $2 exists on the host"
	else
		pass "$1: nothing changed"
	fi
}

# refused NAME STATUS CODE FIELD REGEX: the last call was refused with that status, error
# code and field, its message matching REGEX (the reason named).
refused() {
	local msg field
	msg=$(jget "j['error']['message']")
	field=$(jget "j['error'].get('field')")
	if [ "$CODE" != "$2" ] || [ "$(jget "j['error']['code']")" != "$3" ]; then
		fail "$1" "HTTP $CODE, want $2 $3: $(head -c 300 "$T_DIR/body")"
	elif [ "$field" != "$4" ]; then
		fail "$1" "field $field, want $4: $msg"
	elif ! printf '%s\n' "$msg" | grep -qE -- "$5"; then
		fail "$1" "message does not say /$5/: $msg"
	else
		pass "$1 ($msg)"
	fi
}

# ---- dry runs -----------------------------------------------------------------------------

NEW='{"mode":"active-backup","fail_over_mac":"active","miimon":100,"num_grat_arp":2,"slaves":["va","vb"],"primary":"va"}'
api PUT "/api/v1/bonds/bdn?dry_run=true" "$NEW"
expect "dry run of a new bond" 200
check "its steps: create, set, each slave down and enslaved, primary, up" test \
	"$(jget "' '.join(s['op'] + ':' + s['link'] for s in j['steps'])")" = \
	"create:bdn set:bdn down:va enslave:va down:vb enslave:vb primary:bdn up:bdn"
check "the set step carries every option, the primary step its slave" test \
	"$(jget "(j['steps'][1]['set'], j['steps'][6]['primary'])")" = \
	"({'mode': 'active-backup', 'fail_over_mac': 'active', 'miimon': 100, 'num_grat_arp': 2}, 'va')"
check "its files: one .netdev and a .network per slave, in --networkd-dir" test \
	"$(jget "[f['path'] for f in j['files']]")" = \
	"['$ND/10-isergw-agent-bdn.netdev', '$ND/10-isergw-agent-bdn-va.network', '$ND/10-isergw-agent-bdn-vb.network']"
check "the .netdev says the bond's settings in networkd's words" test \
	"$(jget "[l for l in j['files'][0]['content'].splitlines() if '=' in l and l[0] != '#']")" = \
	"['Name=bdn', 'Kind=bond', 'Mode=active-backup', 'FailOverMACPolicy=active', 'MIIMonitorSec=100ms', 'GratuitousARP=2']"
check "the primary slave's .network says so, the other's does not" test \
	"$(jget "(['PrimarySlave=true' in f['content'] for f in j['files'][1:]], ['Bond=bdn' in f['content'] for f in j['files'][1:]])")" = \
	"([True, False], [True, True])"
nothing_changed "dry run" bdn

api PUT "/api/v1/bonds/bd1?dry_run=true" '{"miimon":100,"slaves":["bd1a"]}'
expect "dry run of a running bond's miimon" 200
check "one step: set miimon (was 0)" test \
	"$(jget "[(s['op'], s['set'], s['was']) for s in j['steps']]")" = \
	"[('set', {'miimon': 100}, {'miimon': 0})]"

api PUT "/api/v1/bonds/bd1?dry_run=true" '{"fail_over_mac":"active","slaves":["bd1a","vb"]}'
expect "dry run of a fail_over_mac change plus a slave" 200
check "the bond goes down, releases its slave, changes, takes it back, adds vb, comes up" test \
	"$(jget "' '.join(s['op'] + ':' + s['link'] for s in j['steps'])")" = \
	"down:bd1 release:bd1a set:bd1 enslave:bd1a down:vb enslave:vb up:bd1"
nothing_changed "dry runs of bd1" bdn

# ---- refusals (409) -----------------------------------------------------------------------

api PUT "/api/v1/bonds/bd1?apply=true" '{"slaves":["vb"]}'
refused "a slave the request does not name is not released" 409 in_use slaves \
	'bd1 has slave bd1a, which the request does not name'
api PUT "/api/v1/bonds/bdn?apply=true" '{"slaves":["va","bd2a"]}'
refused "a slave of another bond is not taken" 409 in_use 'slaves[1]' \
	'bd2a is a slave of bd2, which the request does not name'
api PUT "/api/v1/bonds/bdn?apply=true" '{"slaves":["va","lo"]}'
refused "the interface of the agent's listening address is not enslaved" 409 in_use \
	'slaves[1]' "lo carries the agent's listening address 127.0.0.1"
api PUT "/api/v1/bonds/eth7?apply=true" '{"slaves":["va"]}'
refused "a plain NIC is not turned into a bond" 409 in_use bond 'eth7 exists and is not a bond'
api PUT "/api/v1/bonds/bdn?dry_run=true" '{"slaves":["bd1"]}'
refused "a bond is not nested in another (dry run refuses as apply does)" 409 in_use \
	'slaves[0]' 'bd1 is a bond itself'
nothing_changed "after the refusals" bdn

# ---- isergwctl bond set --dry-run / --apply -------------------------------------------------
# The CLI asks the same plan: its dry run prints the steps and files and changes nothing; an
# apply the plan refuses exits 1 with the agent's reason; --force without --apply is a usage
# error (exit 2) that sends nothing.
CTL=$T_BUILD/isergwctl
ctl() { "$CTL" --url "$URL" --state-dir "$STATE" "$@" >"$T_DIR/ctl.out" 2>&1; }
check "isergwctl bond set --dry-run exits 0" ctl bond set bdn mode=active-backup \
	fail_over_mac=active miimon=100 'slaves=[va,vb]' --dry-run
check "  ... and prints the plan's steps in order, then the files" test \
	"$(awk '$1 != "file" && NR > 1 {printf "%s:%s ", $1, $2} $1 == "file" {printf "file "}' "$T_DIR/ctl.out")" = \
	"create:bdn set:bdn down:va enslave:va down:vb enslave:vb up:bdn file file file "
nothing_changed "isergwctl dry run" bdn
ctl bond set bdn 'slaves=[va,bd2a]' --apply
CTL_RC=$?
check "isergwctl bond set --apply of a refused plan exits 1 with the reason" \
	bash -c "[ $CTL_RC = 1 ] && grep -q 'bd2a is a slave of bd2' '$T_DIR/ctl.out'"
ctl bond set bdn 'slaves=[va]' --force
CTL_RC=$?
check "isergwctl --force without --apply is a usage error (exit 2)" \
	bash -c "[ $CTL_RC = 2 ] && grep -q -- '--force goes with --apply' '$T_DIR/ctl.out'"
nothing_changed "after isergwctl's refusals" bdn

# The default route's interface: in a network namespace of the test's own, where dr0 (one
# end of a veth pair) carries the default route, whatever this host's routes are. The agent
# there answers on its own loopback, reached through nsenter.
AGENT_WRAP=(unshare -n sh -c "ip link set lo up && ip link add dr0 type veth peer name dr1 && \
	ip link set dr1 up && ip addr add 10.231.0.1/24 dev dr0 && ip link set dr0 up && \
	ip route add default via 10.231.0.2 dev dr0 && exec \"\$0\" \"\$@\"")
agent_stop
AGENT_PORT_WAIT=0 agent_start ns "$ND"
AGENT_WRAP=()
ns_api() {
	CODE=$(nsenter -t "$AGENT_PID" -n curl -s -m 30 -o "$T_DIR/body" -w '%{http_code}' \
		-X PUT -H "Authorization: Bearer $ADMIN" -H "Content-Type: application/json" \
		--data-binary "$2" "$URL$1" 2>/dev/null)
}
# ns_planned: the agent in the namespace answers with the gateway's model (bd1 plans).
ns_planned() {
	ns_api "/api/v1/bonds/bd1?dry_run=true" '{"miimon":100,"slaves":["bd1a"]}'
	[ "$CODE" = 200 ]
}
if wait_for 20 ns_planned; then
	ns_api "/api/v1/bonds/bdn?apply=true" '{"slaves":["dr0"]}'
	refused "the default route's interface is not enslaved" 409 in_use 'slaves[0]' \
		"dr0 carries the default route"
	ns_api "/api/v1/bonds/bdn?dry_run=true" '{"slaves":["va"]}'
	check "  ... while another interface there is planned (200)" test "$CODE" = 200
else
	fail "the default route's interface is not enslaved" \
		"the agent in its namespace did not answer: HTTP $CODE $(tail -n 5 "$T_DIR/agent.ns.log")"
fi
agent_stop
agent_start 1b "$ND"
check "the agent is back on the gateway's model" wait_for 20 model_has bd1 bd2

# ---- bad input (400/422) ------------------------------------------------------------------

api PUT "/api/v1/bonds/bdx?apply=true" '{"mode":"active-backup"}'
refused "an unknown bond without slaves" 422 invalid slaves 'no bond bdx on this host'
api PUT "/api/v1/bonds/bdn?apply=true" '{"slaves":["va","nosuch0"]}'
refused "a slave that does not exist" 422 invalid 'slaves[1]' 'no interface nosuch0'
api PUT "/api/v1/bonds/bond0123456789ab?apply=true" '{"slaves":["va"]}'
refused "a bond name over 15 characters" 400 bad_request bond 'not an interface name'
api PUT "/api/v1/bonds/bd:1?apply=true" '{"slaves":["va"]}'
refused "a bond name with a ':'" 400 bad_request bond 'not an interface name'
api PUT "/api/v1/bonds/bdn?apply=true" '{"mode":"active-passive","slaves":["va"]}'
refused "a mode that does not exist" 422 invalid mode 'one of balance-rr, active-backup'
api PUT "/api/v1/bonds/bdn?apply=true" '{"mode":7,"slaves":["va"]}'
refused "a mode given as a number" 422 invalid mode 'one of balance-rr'
api PUT "/api/v1/bonds/bdn?apply=true" '{"miimon":60001,"slaves":["va"]}'
refused "miimon over its range" 422 invalid miimon '0\.\.60000'
api PUT "/api/v1/bonds/bdn?apply=true" '{"miimon":-1,"slaves":["va"]}'
refused "a negative miimon" 422 invalid miimon '0\.\.60000'
api PUT "/api/v1/bonds/bdn?apply=true" '{"num_grat_arp":256,"slaves":["va"]}'
refused "num_grat_arp over 255" 422 invalid num_grat_arp '0\.\.255'
api PUT "/api/v1/bonds/bdn?apply=true" '{"slaves":["va","va"]}'
refused "a slave named twice" 422 invalid 'slaves[1]' 'listed twice'
api PUT "/api/v1/bonds/bdn?apply=true" '{"slaves":["bdn"]}'
refused "a bond as its own slave" 422 invalid 'slaves[0]' 'its own slave'
nothing_changed "after the bad input" bdn

# A networkd folder that cannot take the files: refused before any netlink call.
agent_stop
agent_start 2 "$T_DIR/no-such-folder"
wait_for 20 model_has bd1 || fail "model (2)" "the agent did not get the gateway's model"
api PUT "/api/v1/bonds/bdn?apply=true" '{"slaves":["va","vb"]}'
refused "a networkd folder that does not exist" 422 invalid networkd_dir \
	"no-such-folder is not writable \(No such file"
touch "$T_DIR/a-file"
agent_stop
agent_start 3 "$T_DIR/a-file"
wait_for 20 model_has bd1 || fail "model (3)" "the agent did not get the gateway's model"
api PUT "/api/v1/bonds/bdn?apply=true" '{"slaves":["va","vb"]}'
refused "a networkd folder that is a file" 422 invalid networkd_dir "a-file is not writable"
nothing_changed "after the unwritable folders" bdn
api PUT "/api/v1/bonds/bdn" '{"slaves":["va","vb"]}'
expect "without ?apply the settings are stored as before (no host check)" 200
check "no apply, no applied steps in the answer" test "$(jget "'applied' in j")" = False
agent_stop

# ---- a bond carrying the gateway's TCP sessions -------------------------------------------
# The gateway's addresses file puts 127.0.0.1 on bd1 (written aside and moved in), so its
# network model chains the TCP portal to bd1. While isergw-bench holds a session, a change of
# bd1 is refused unless force=true; once the session is gone it is planned again.
BENCH=$T_TOOLS/isergw-bench
if [ ! -x "$BENCH" ]; then
	skip sessions "no $BENCH"
	gw_stop "$T_GW_PID"
	t_end
fi
printf 'bd1 127.0.0.1/8\n' >"$T_DIR/isergw-addrs.new"
mv "$T_DIR/isergw-addrs.new" "$SYS/isergw-addrs"
rm -rf "$STATE"
agent_start 4 "$ND"
ADMIN=$(cat "$STATE/admin.token")
MIIMON='{"miimon":100,"slaves":["bd1a"]}'
# dry STATUS [QUERY]: a dry run of the miimon change answers STATUS.
dry() {
	api PUT "/api/v1/bonds/bd1?dry_run=true${2:-}" "$MIIMON"
	[ "$CODE" = "$1" ]
}
check "without sessions, the change of bd1 is planned" wait_for 20 dry 200
"$BENCH" -q 1 -b 4096 -t 30 -S 16777216 "iscsi://$T_HOST:$GW_PORT/$IQN/0" \
	>"$T_DIR/bench.out" 2>&1 &
BPID=$!
T_PIDS+=("$BPID")
if wait_for 25 dry 409; then
	refused "a bond carrying a TCP session is not changed" 409 in_use bond \
		'1 TCP session runs over bond bd1: apply with force=true'
	api PUT "/api/v1/bonds/bd1?dry_run=true&force=true" "$MIIMON"
	expect "force=true plans it anyway" 200
else
	fail "a bond carrying a TCP session is not changed" \
		"no 409 while isergw-bench ran: HTTP $CODE $(head -c 300 "$T_DIR/body")"
fi
wait "$BPID"
check "isergw-bench ran its session to the end" grep -q 'ios=' "$T_DIR/bench.out"
check "once the session is gone, the change is planned again" wait_for 20 dry 200
agent_stop
gw_stop "$T_GW_PID"
t_end

#!/bin/bash
# Self-fencing (docs/CLUSTER.md, "Fencing"): two gateways and two agents on loopback share one
# LUN through a real etcd, each agent reaching etcd through its own relay
# (tests/lib/etcd_relay.py) so one agent alone can be partitioned. A poller
# (isergw-alua poll) reads REPORT TARGET PORT GROUPS through both gateways every 100 ms for the
# whole test and records every sample. Faults, each against the gateway that owns the LUN:
# (a) its agent stopped (SIGSTOP: no renewal, the gateway lives and hosts reach it), (b) its
# agent cut from etcd, (c) kill -9 of the gateway and its agent. In each the other gateway
# takes the LUN over (the time is printed), the owner's gateway fences itself to standby
# where it lives, and after the fault is healed exactly one gateway is optimized again. At no
# sample of the whole run do both gateways report active/optimized. In (a) and (b), while the
# owner's gateway is fenced, a host writes through it to LUN 0 and LUN 1 (owned by different
# event loops when the gateway runs two): every write is refused NOT READY 02/04/0b and neither
# backing file changes; once healed, the same writes through it land.
#
#   tests/integration/test_fencing.sh        (BUILD=build|build/san)
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/api.sh"
. "$(dirname "$0")/../lib/etcd.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/hosts.sh"

t_begin fencing
if [ "$TARGET" != isergwd ]; then
	skip fencing "the cluster is made of isergwd gateways and agents"
	t_end
fi
AGENT=$T_BUILD/isergw-agent
ALUA=$T_TOOLS/isergw-alua
if [ ! -x "$AGENT" ] || [ ! -x "$ALUA" ]; then
	skip fencing "no $AGENT or $ALUA (make test-build)"
	t_end
fi
if ! t_need etcd curl python3; then
	skip fencing "needs etcd (Debian package etcd-server), curl and python3"
	t_end
fi

TTL=3
MARGIN=1000
IQN=iqn.2026-11.org.isergw:fencing
PREFIX=/isergw/fence-$$
ETCD_PORT=$(t_free_port)
ETCD_PEER=$(t_free_port)
RELAY_PORT_A=$(t_free_port)
RELAY_PORT_B=$(t_free_port)
GW_PORT_A=$(t_free_port)
GW_PORT_B=$(t_free_port)
API_PORT_A=$(t_free_port)
API_PORT_B=$(t_free_port)
ETCD_URL=http://$T_HOST:$ETCD_PORT
LUNIMG=$T_SHM/fencing-lun0.img
LUNIMG1=$T_SHM/fencing-lun1.img
URL_A=iscsi://$T_HOST:$GW_PORT_A/$IQN/0
URL_B=iscsi://$T_HOST:$GW_PORT_B/$IQN/0
POLL=$T_DIR/poll.log
# Bound for a takeover: the lease (TTL), the hold (TTL + margin) and a few polls, about 9 s at
# most (6.4-8.3 s measured in make test); twice that, so that a takeover twice as slow fails.
TAKEOVER_MAX=$(((TTL * 2 + 3) * 2))

relay_start() {
	t_daemon_start "relay-$1" relay "$T_DIR/relay-$1.log" \
		python3 "$T_ROOT/tests/lib/etcd_relay.py" "$2" "$ETCD_PORT" "$T_DIR/cut-$1"
	t_wait_port "$T_LAST_PID" "$2" 10
}

# gw_up A|B: sets GW_A / GW_B.
gw_up() {
	local port
	if [ "$1" = A ]; then port=$GW_PORT_A; else port=$GW_PORT_B; fi
	gw_start "$T_DIR/gw-$1.json" "$T_DIR/gw-$1.$(date +%s%N).log" "$port" || return 1
	eval "GW_$1=$T_GW_PID"
}

# agent_up A|B: sets AG_A / AG_B (and AGENT_PID); its etcd is its relay.
agent_up() {
	local group api relay
	if [ "$1" = A ]; then group=1 api=$API_PORT_A relay=$RELAY_PORT_A
	else group=2 api=$API_PORT_B relay=$RELAY_PORT_B; fi
	ASAN_OPTIONS="log_path=$T_DIR/san/asan-agent-$1:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
		UBSAN_OPTIONS="log_path=$T_DIR/san/ubsan-agent-$1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
		t_daemon_start "agent-$1" agent "$T_DIR/agent-$1.$(date +%s%N).log" \
		"$AGENT" --state-dir "$T_DIR/agent-$1" --listen "$T_HOST:$api" \
		--gateway-socket "$T_DIR/ctl-$1.sock" --store etcd \
		--etcd-endpoints "http://$T_HOST:$relay" --cluster-prefix "$PREFIX" \
		--gateway-id "gw-$1" --port-group "$group" --lease-ttl "$TTL" \
		--backstore-dirs "$T_SHM"
	eval "AG_$1=$T_LAST_PID"
	AGENT_PID=$T_LAST_PID
	t_wait_port "$T_LAST_PID" "$api" 15
}
# What cluster_start_pair starts the agents with (the port group and API port are agent_up's).
agent_start() { agent_up "$1"; }

api_a() {
	API_URL=http://$T_HOST:$API_PORT_A ADMIN=$(cat "$T_DIR/agent-A/admin.token") api "$@"
}

# The last sample: "A B" states.
last_states() {
	tail -n 1 "$POLL" | awk '$1 == "sample" { print $3, $4 }'
}

# owner_is A|B: the last sample shows exactly that gateway active/optimized.
owner_is() {
	local s
	s=$(last_states)
	case "$1" in
	A) [ "$s" = "ao ${s#* }" ] && [ "${s#* }" != ao ] ;;
	B) [ "${s% *}" != ao ] && [ "${s#* }" = ao ] ;;
	esac
}

# The gateway that owns the LUN now (A or B), from the last sample; empty if none.
current_owner() {
	if owner_is A; then echo A; elif owner_is B; then echo B; fi
}

has_owner() {
	[ -n "$(current_owner)" ]
}

# settled: the last 20 samples (2 s) are each one gateway ao and the other ano (nothing
# moving: no hold, no fence).
settled() {
	[ "$(tail -n 20 "$POLL" | awk '$1 == "sample" && (($3 == "ao" && $4 == "ano") ||
		($3 == "ano" && $4 == "ao"))' | wc -l)" = 20 ]
}

# fence_of A|B: "FENCED FENCES" of the gateway's fence state (control socket, op state).
fence_of() {
	gw_ctl "$T_DIR/ctl-$1.sock" '{"op":"state"}' >"$T_DIR/state-$1" 2>/dev/null &&
		python3 -c "import json,sys; f=json.load(open(sys.argv[1]))['fence']; print(f['fenced'], f['fences'])" \
			"$T_DIR/state-$1"
}

# fenced_now A|B: the gateway says it is fenced.
fenced_now() {
	local f
	f=$(fence_of "$1") && [ "${f% *}" = True ]
}

# A gateway's state column in samples after line $1: its states seen (sorted, unique).
seen_after() {
	local col
	if [ "$2" = A ]; then col=3; else col=4; fi
	tail -n +"$1" "$POLL" | awk -v c="$col" '$1 == "sample" { print $c }' | sort -u | tr '\n' ' '
}

# ---- start ----------------------------------------------------------------------------------

if ! relay_start A "$RELAY_PORT_A" || ! relay_start B "$RELAY_PORT_B"; then
	fail start "the etcd relays did not start"
	t_end
fi
cluster_start_pair isergw-fence "$T_DIR/etcd.log"
truncate -s 16M "$LUNIMG" "$LUNIMG1"
api_a POST /api/v1/targets "{\"name\":\"$IQN\",\"allow_any_initiator\":true,\"portals\":[\"tcp0\"]}"
expect "POST target" 201
api_a POST /api/v1/targets/$IQN/luns "{\"lun\":0,\"backstore\":{\"type\":\"file\",\"path\":\"$LUNIMG\",\"size\":\"16M\"}}"
expect "POST LUN 0 (no preferred owner: the members' hash picks it)" 201
api_a POST /api/v1/targets/$IQN/luns "{\"lun\":1,\"backstore\":{\"type\":\"file\",\"path\":\"$LUNIMG1\",\"size\":\"16M\"}}"
expect "POST LUN 1 (the fenced writes' second LUN)" 201
check "both gateways serve the LUNs" wait_for 15 bash -c "'$ALUA' info '$URL_A' >/dev/null && '$ALUA' info '$URL_B' >/dev/null && '$ALUA' info '${URL_A%/0}/1' >/dev/null && '$ALUA' info '${URL_B%/0}/1' >/dev/null"
# The fenced writes reach a LUN of each loop: LUs go to the loop owning fewest.
for g in A B; do
	ll=$(lun_loops "$T_DIR/ctl-$g.sock")
	if [ "${ll#*/ }" -ge 2 ] 2>/dev/null; then
		check "gateway $g runs ${ll#*/ } loops and its LUNs 0 and 1 are owned by loops 0 and 1 ($ll)" \
			test "${ll% /*}" = "0 1"
	else
		t_log "  gateway $g: LUN owner loops / loops: ${ll:-no state} (one loop: both LUNs on it)"
	fi
done

STOP=$T_DIR/poll.stop
ASAN_OPTIONS="log_path=$T_DIR/san/asan-poll:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
	t_daemon_start poller relay "$POLL" "$ALUA" poll -p 100 -t 900 -f "$STOP" "$URL_A" "$URL_B"
POLLER=$T_LAST_PID
check "one gateway becomes active/optimized (after its hold of TTL + margin)" \
	wait_for 20 has_owner
check "ownership settles: exactly one optimized for 2 s" wait_for 20 settled
for g in A B; do
	f=$(fence_of $g)
	check "gateway $g got a lease and is not fenced ($f)" test "${f% *}" = False
done

# ---- the scenarios --------------------------------------------------------------------------

# takeover NAME: waits for the other gateway (not $O) to be optimized; prints the time.
takeover() {
	local t0=$1 name=$2 ms
	if wait_for "$TAKEOVER_MAX" owner_is "$P"; then
		ms=$((($(date +%s%N) - t0) / 1000000))
		pass "$name: gateway $P took the LUN over in $ms ms (lease $TTL s, margin $MARGIN ms)"
		TAKEOVERS+=("$name=${ms}ms")
	else
		fail "$name: takeover" "gateway $P is not optimized after $TAKEOVER_MAX s: $(last_states)"
	fi
}

other() { if [ "$1" = A ]; then echo B; else echo A; fi; }
TAKEOVERS=()

# (a) the owner's agent stopped -------------------------------------------------------------
O=$(current_owner)
if [ -z "$O" ]; then
	# Without an owner the scenarios below have nothing to fence: a failure, said once.
	fail "an owner before the faults" "no gateway is active/optimized: $(last_states)"
	t_end
fi
P=$(other "$O")
t_log "(a) owner: gateway $O; stopping its agent"
eval "AGO=\$AG_$O URL_O=\$URL_$O"
check "(a) a host logs in through gateway $O before the fault" host_start ha "$T_INI1" 11 "${URL_O%/0}"
line=$(wc -l <"$POLL")
t_fault "(a) SIGSTOP to agent $O" kill -STOP "$AGO"
t0=$(date +%s%N)
check "(a) agent $O is stopped (state T)" t_wait_for 5 t_sigstopped "$AGO"
takeover "$t0" "(a) agent $O stopped"
check "(a) gateway $O fenced itself (its states since: $(seen_after "$line" "$O"))" \
	fenced_now "$O"
check "(a) and was seen standby by the poller" grep -q standby <<<"$(seen_after "$line" "$O")"
check "(a) gateway $P stayed non-optimized, serving I/O, while it waited, never transitioning ($(seen_after "$line" "$P"))" \
	bash -c "grep -qw ano <<<'$(seen_after "$line" "$P")' && ! grep -q transitioning <<<'$(seen_after "$line" "$P")'"
grep -q "fenced: no lease renewal" "$T_DIR"/gw-"$O"*.log &&
	pass "(a) gateway $O logged its fence" || fail "(a) fence log" "no 'fenced' line in gateway $O's log"
check "(a) the host's writes through fenced gateway $O to LUNs 0 and 1: NOT READY 02/04/0b, nothing written" \
	fenced_writes_refused ha 100 0xa1 "$LUNIMG" "$LUNIMG1"
t_fault "(a) SIGCONT to agent $O" kill -CONT "$AGO"
check "(a) healed: exactly one optimized again" wait_for 30 settled
check "(a) healed: the same writes through gateway $O land in both backing files" \
	writes_land ha 100 0xa1 "$LUNIMG" "$LUNIMG1"
check "(a) the host logs out" host_stop ha
t_log "  (a) after healing: $(last_states) (A B)"

# (b) the owner's agent cut from etcd ------------------------------------------------------
O=$(current_owner)
P=$(other "$O")
t_log "(b) owner: gateway $O; cutting its agent from etcd"
eval "URL_O=\$URL_$O"
check "(b) a host logs in through gateway $O before the fault" host_start hb "$T_INI1" 12 "${URL_O%/0}"
line=$(wc -l <"$POLL")
touch "$T_DIR/cut-$O"
t0=$(date +%s%N)
takeover "$t0" "(b) agent $O cut from etcd"
check "(b) gateway $O fenced itself (its states since: $(seen_after "$line" "$O"))" \
	grep -q standby <<<"$(seen_after "$line" "$O")"
eval "AGO=\$AG_$O"
check "(b) its agent still runs" t_alive "$AGO"
check "(b) gateway $O says it is fenced" fenced_now "$O"
check "(b) the host's writes through fenced gateway $O to LUNs 0 and 1: NOT READY 02/04/0b, nothing written" \
	fenced_writes_refused hb 200 0xb1 "$LUNIMG" "$LUNIMG1"
rm -f "$T_DIR/cut-$O"
check "(b) healed: exactly one optimized again" wait_for 30 settled
check "(b) healed: the same writes through gateway $O land in both backing files" \
	writes_land hb 200 0xb1 "$LUNIMG" "$LUNIMG1"
check "(b) the host logs out" host_stop hb
t_log "  (b) after healing: $(last_states) (A B)"

# (c) kill -9 of the owner's gateway and agent ----------------------------------------------
O=$(current_owner)
P=$(other "$O")
t_log "(c) owner: gateway $O; kill -9 of it and its agent"
eval "GWO=\$GW_$O AGO=\$AG_$O"
{
	t_fault "(c) SIGKILL to gateway and agent $O" kill -KILL "$GWO" "$AGO"
	wait "$GWO"; grc=$?; wait "$AGO"; arc=$?
} 2>/dev/null
t_forget "$GWO"
t_forget "$AGO"
check "(c) gateway and agent $O died of the SIGKILL (status $grc and $arc)" test "$grc $arc" = "137 137"
t0=$(date +%s%N)
takeover "$t0" "(c) gateway and agent $O killed"
if gw_up "$O" && agent_up "$O"; then
	pass "(c) gateway and agent $O restarted"
else
	fail "(c) restart" "gateway or agent $O did not start again"
fi
check "(c) healed: exactly one optimized again" wait_for 30 settled
t_log "  (c) after healing: $(last_states) (A B)"

# ---- the invariant over every sample --------------------------------------------------------

touch "$STOP"
for _ in $(seq 50); do t_alive "$POLLER" || break; sleep 0.1; done
t_stop_pid "$POLLER" 5
t_forget "$POLLER"
N=$(grep -c '^sample ' "$POLL")
BOTH=$(awk '$1 == "sample" && $3 == "ao" && $4 == "ao"' "$POLL" | wc -l)
SPAN=$(awk '$1 == "sample" { t = $2 } END { print int(t / 1000) }' "$POLL")
t_log "  samples: $N over ${SPAN} s; A ao $(awk '$3 == "ao"' "$POLL" | wc -l), B ao $(awk '$4 == "ao"' "$POLL" | wc -l), none ao $(awk '$1 == "sample" && $3 != "ao" && $4 != "ao"' "$POLL" | wc -l), a gateway down $(grep -c ' down' "$POLL")"
t_log "  takeovers: ${TAKEOVERS[*]}"
check "the poller took a sample about every 100 ms ($N samples over $SPAN s)" \
	test "$N" -ge $((SPAN * 5)) -a "$N" -gt 100
check "at no sample were both gateways active/optimized ($BOTH of $N)" test "$BOTH" = 0
if [ "$BOTH" != 0 ]; then
	awk '$1 == "sample" && $3 == "ao" && $4 == "ao"' "$POLL" | head -n 5
fi

for g in A B; do
	eval "pid=\$AG_$g"
	t_stop_checked "$pid" "agent-$g" && t_forget "$pid"
done
t_end

#!/bin/bash
# cluster-mpath: a cluster's failover as a host sees it (docs/CLUSTER.md). etcd, two gateways
# and their two agents run in the guest; the cluster serves one LUN (a file both gateways open,
# as in tests/integration/test_cluster.sh) on two portals, one per gateway. The kernel initiator
# logs in to both; multipathd, configured with the device section docs/CLUSTER.md gives hosts
# (ALUA: group_by_prio, prio alua, hardware_handler "1 alua", no_path_retry 12), builds one
# map with the owner's path in the optimized group. failover-io.py writes 64 KiB blocks through
# the map with O_DIRECT, each read back at once, for the whole run. Faults, each against the
# gateway that owns the LUN at the time:
#   gwkill  kill -9 of the owner's gateway alone, then the gateway started again (as systemd
#         would): its agent keeps the membership, so the LUN does not move, and the host writes
#         through the other gateway's non-optimized path meanwhile;
#   kill  kill -9 of the owner's gateway and its agent together (a machine lost: the lease
#         lapses and the other gateway takes the LUN over);
#   cut   the owner's agent cut from etcd by the kernel's packet filter (iptables DROP both ways
#         on the etcd address only that agent uses) while hosts keep reaching its gateway: a
#         partition, as the agent sees it (its calls time out; it does not stop, as SIGSTOP
#         would make it), with the gateway alive and serving until it fences itself;
# then what follows each: the killed pair started again ("rejoin") and the cut lifted ("heal"),
# after which the LUN's owner may take it back. Checks: the other gateway takes over each time
# (REPORT TARGET PORT GROUPS polled through both gateways by isergw-alua for the whole run, and
# at no sample are both optimized), the writes go on, the map's two paths are back (active,
# ready, groups of priority 50 and 10) after each heal, and at the end the writer saw zero I/O
# errors and every block reads back as its last write (the LUN starts zeroed and every write's
# data is unique to it, so a lost write cannot read back right). The stall (the longest pause
# between two completed writes after each event) is printed and kept in
# share/cluster-mpath.txt; docs/PERFORMANCE.md, "Cluster failover seen by the kernel initiator".
# Only a generous sanity bound is asserted on it: within no_path_retry's queueing window.
# shellcheck source=tests/vm/guest/lib.sh
. "$(dirname "$0")/lib.sh"
vm_begin cluster-mpath

# Settings a measurement may change, from $VM_BUILD/cluster-mpath.env (the guest sees the host's
# files, not its environment): CLUSTER_TTL, the agents' --lease-ttl [5, their default: with 3,
# an emulated guest on a busy host answers a keepalive late often enough that the gateways fence
# themselves every few seconds]; CLUSTER_POLLING, multipathd's polling_interval [unset: its
# default, 5 s].
CLUSTER_TTL=5
CLUSTER_POLLING=
# shellcheck disable=SC1091
[ -r "$VM_BUILD/cluster-mpath.env" ] && . "$VM_BUILD/cluster-mpath.env"
TTL=$CLUSTER_TTL
GW_A=10.200.7.1
GW_B=10.200.7.2
ETCD_A=10.200.7.10		# agent A's way to etcd
ETCD_B=10.200.7.11		# agent B's: what a cut of B drops
IQN=iqn.2026-11.org.isergw:vm-cluster
PREFIX=/isergw/vm
LUNIMG=$VM_WORK/lun0.img
URL_A=iscsi://$GW_A:3260/$IQN/0
URL_B=iscsi://$GW_B:3260/$IQN/0
AGENT=$VM_BUILD/isergw-agent
ALUA=$VM_BUILD/tests/tools/isergw-alua
POLL=$VM_WORK/poll.log
IOLOG=$VM_WORK/io.log
EVENTS=$VM_WORK/events
OWNER=
# The host queues I/O without a path for no_path_retry (12) x polling_interval (5 s): a stall
# longer than that is an I/O error anyway. The expected stalls are a few TTLs.
STALL_MAX=50

if ! vm_need etcd curl jq iscsiadm iscsid multipathd multipath dmsetup python3 iptables \
	/lib/systemd/systemd-udevd "$AGENT" "$ALUA"; then
	skip all "$VM_MISSING is not installed (etcd-server, curl, jq, open-iscsi, multipath-tools, iptables, udev; make test-build)"
	vm_end
fi
if ! vm_modprobe dm_multipath dm_service_time scsi_dh_alua dummy; then
	fail modules "modprobe $VM_MISSING failed"
	vm_end
fi

run ip link add cm0 type dummy && vm_on_exit "ip link del cm0 2>/dev/null"
run ip link set cm0 up
for a in "$GW_A" "$GW_B" "$ETCD_A" "$ETCD_B"; do
	run ip addr add "$a/24" dev cm0
done

# now: the wall clock (seconds, as failover-io.py logs it).
now() {
	date +%s.%N
}

# event NAME: an event of the run, at the wall clock.
event() {
	echo "$1 $(now)" >>"$EVENTS"
	echo "=== event $1"
}

# ---- etcd, two gateways, two agents ---------------------------------------------------------

ETCD_PID=
etcd_stop() {
	[ -n "$ETCD_PID" ] || return 0
	kill -TERM "$ETCD_PID" 2>/dev/null
	timeout 10 tail --pid="$ETCD_PID" -f /dev/null
	kill -KILL "$ETCD_PID" 2>/dev/null
	wait "$ETCD_PID" 2>/dev/null
	ETCD_PID=
}

etcd_up() {
	local a
	etcd --name vm --data-dir "$VM_WORK/etcd" \
		--listen-client-urls "http://$ETCD_A:2379,http://$ETCD_B:2379" \
		--advertise-client-urls "http://$ETCD_A:2379" \
		--listen-peer-urls http://127.0.0.1:2380 \
		--initial-advertise-peer-urls http://127.0.0.1:2380 \
		--initial-cluster vm=http://127.0.0.1:2380 >"$VM_WORK/etcd.log" 2>&1 &
	ETCD_PID=$!
	vm_on_exit etcd_stop
	for a in "$ETCD_A" "$ETCD_B"; do
		t_wait_for 60 curl -sf -m 5 -X POST "http://$a:2379/v3/kv/range" -d '{"key":"AA=="}' \
			-o /dev/null || {
			echo "etcd does not answer on $a: $(tail -n 5 "$VM_WORK/etcd.log")"
			return 1
		}
	done
}

declare -A GW_PID=() AG_PID=()

# gw_up A|B: that gateway, with one portal tcp0 on its address and no targets of its own.
gw_up() {
	local g=$1 addr
	if [ "$g" = A ]; then addr=$GW_A; else addr=$GW_B; fi
	cat >"$VM_WORK/gw-$g.json" <<-EOF
		{ "gateway": { "control_socket": "$VM_WORK/ctl-$g.sock" },
		  "portals": [ { "name": "tcp0", "transport": "tcp", "address": "$addr", "port": 3260 } ],
		  "targets": [] }
	EOF
	"$VM_BUILD/isergwd" --config "$VM_WORK/gw-$g.json" >>"$VM_WORK/gw-$g.log" 2>&1 &
	GW_PID[$g]=$!
	t_wait_for 30 vm_port_open "$addr" 3260 || {
		echo "gateway $g did not open $addr:3260: $(tail -n 5 "$VM_WORK/gw-$g.log")"
		return 1
	}
}

# agent_up A|B: its agent, reaching etcd on its own address.
agent_up() {
	local g=$1 group etcd port
	if [ "$g" = A ]; then group=1 etcd=$ETCD_A port=8081; else group=2 etcd=$ETCD_B port=8082; fi
	"$AGENT" --state-dir "$VM_WORK/agent-$g" --listen "127.0.0.1:$port" \
		--gateway-socket "$VM_WORK/ctl-$g.sock" --store etcd \
		--etcd-endpoints "http://$etcd:2379" --cluster-prefix "$PREFIX" \
		--gateway-id "gw-$g" --port-group "$group" --lease-ttl "$TTL" \
		--backstore-dirs "$VM_WORK" >>"$VM_WORK/agent-$g.log" 2>&1 &
	AG_PID[$g]=$!
	t_wait_for 30 vm_port_open 127.0.0.1 "$port" || {
		echo "agent $g did not listen on $port: $(tail -n 5 "$VM_WORK/agent-$g.log")"
		return 1
	}
}

# stop_pid PID: SIGTERM, then SIGKILL after 15 s.
stop_pid() {
	[ -n "$1" ] || return 0
	kill -TERM "$1" 2>/dev/null
	timeout 15 tail --pid="$1" -f /dev/null
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

# The agents first (each fences its gateway and revokes its lease), then the gateways.
cluster_stop() {
	stop_pid "${AG_PID[A]:-}"
	stop_pid "${AG_PID[B]:-}"
	stop_pid "${GW_PID[A]:-}"
	stop_pid "${GW_PID[B]:-}"
}

# api_a METHOD PATH BODY: agent A's REST API with its admin token; prints the HTTP status.
api_a() {
	curl -s -m 30 -o "$VM_WORK/body" -w '%{http_code}' -X "$1" \
		-H "Authorization: Bearer $(cat "$VM_WORK/agent-A/admin.token")" \
		-H "Content-Type: application/json" --data-binary "$3" "http://127.0.0.1:8081$2"
}

provision() {
	local code
	truncate -s 64M "$LUNIMG" || return 1
	code=$(api_a POST /api/v1/targets \
		"{\"name\":\"$IQN\",\"allow_any_initiator\":true,\"portals\":[\"tcp0\"]}")
	[ "$code" = 201 ] || { echo "POST target: $code $(cat "$VM_WORK/body")"; return 1; }
	code=$(api_a POST "/api/v1/targets/$IQN/luns" \
		"{\"lun\":0,\"backstore\":{\"type\":\"file\",\"path\":\"$LUNIMG\",\"size\":\"64M\"}}")
	[ "$code" = 201 ] || { echo "POST LUN: $code $(cat "$VM_WORK/body")"; return 1; }
	t_wait_for 60 "$ALUA" info "$URL_A" >/dev/null 2>&1 &&
		t_wait_for 60 "$ALUA" info "$URL_B" >/dev/null 2>&1
}

gateways_up() {
	gw_up A && gw_up B
}
agents_up() {
	agent_up A && agent_up B
}
if ! check etcd etcd_up; then
	vm_end
fi
# Registered after etcd's stop: the agents stop first, while etcd still takes their revocations.
vm_on_exit cluster_stop
if ! check gateways gateways_up || ! check agents agents_up; then
	vm_end
fi
if ! check provision provision; then
	tail -n 20 "$VM_WORK"/agent-*.log
	vm_end
fi

# ---- the witness: REPORT TARGET PORT GROUPS through both gateways, every 250 ms -------------

POLL_PID=
poll_stop() {
	[ -n "$POLL_PID" ] || return 0
	touch "$VM_WORK/poll.stop"
	timeout 10 tail --pid="$POLL_PID" -f /dev/null
	kill -KILL "$POLL_PID" 2>/dev/null
	wait "$POLL_PID" 2>/dev/null
	POLL_PID=
}
"$ALUA" poll -p 250 -t 1500 -f "$VM_WORK/poll.stop" "$URL_A" "$URL_B" >"$POLL" \
	2>"$VM_WORK/poll.err" &
POLL_PID=$!
vm_on_exit poll_stop

# owner: A or B, the gateway the last sample shows optimized while the other is not.
owner() {
	grep '^sample ' "$POLL" | tail -n 1 | awk '{
		if ($3 == "ao" && $4 != "ao") print "A"; else if ($4 == "ao" && $3 != "ao") print "B" }'
}

owner_is() {
	[ "$(owner)" = "$1" ]
}

# settled: the last 8 samples (2 s) each show one gateway optimized, the other non-optimized.
settled() {
	[ "$(grep '^sample ' "$POLL" | tail -n 8 | awk '(($3 == "ao" && $4 == "ano") ||
		($3 == "ano" && $4 == "ao"))' | wc -l)" = 8 ]
}

# seen_since LINE A|B: the gateway's states in the samples after line LINE of the poll log.
seen_since() {
	local col=3
	[ "$2" = B ] && col=4
	tail -n +"$1" "$POLL" | awk -v c="$col" '$1 == "sample" { print $c }' | sort -u | tr '\n' ' '
}

other() { if [ "$1" = A ]; then echo B; else echo A; fi; }

# cluster_of A|B: that agent's GET /api/v1/cluster, into $VM_WORK/cluster-A|B.json.
cluster_of() {
	local port=8081
	[ "$1" = B ] && port=8082
	curl -sf -m 10 -H "Authorization: Bearer $(cat "$VM_WORK/agent-$1/admin.token")" \
		"http://127.0.0.1:$port/api/v1/cluster" >"$VM_WORK/cluster-$1.json" 2>/dev/null
}

# stable: both agents see both members with etcd answering, agree on the LUN's owner and hold
# nothing pending, and the poller shows that owner optimized and the other non-optimized for
# the last 2 s. Sets OWNER (A or B). A member that just joined is seen by both agents before
# its hold starts, so a takeback in progress is never taken for the final state.
stable() {
	local g oa ob
	for g in A B; do
		cluster_of "$g" && jq -e '(.members | keys) == ["gw-A", "gw-B"] and
			.etcd_state == "ok" and (.owners | length) == 1 and
			(.owners[0].pending | not)' "$VM_WORK/cluster-$g.json" >/dev/null 2>&1 ||
			return 1
	done
	oa=$(jq -r '.owners[0].owner' "$VM_WORK/cluster-A.json")
	ob=$(jq -r '.owners[0].owner' "$VM_WORK/cluster-B.json")
	[ "$oa" = "$ob" ] && settled && [ "$(owner)" = "${oa#gw-}" ] || return 1
	OWNER=${oa#gw-}
}

# wait_stable NAME: stable within 120 s (a pass), or a failure with what each side shows.
wait_stable() {
	if t_wait_for 120 stable; then
		pass "$1" "gateway $OWNER optimized, the other non-optimized; both agents agree"
		return 0
	fi
	fail "$1" "A: $(jq -c '{members: (.members | keys), etcd_state, owners}' \
		"$VM_WORK/cluster-A.json" 2>/dev/null) B: $(jq -c '{members: (.members | keys),
		etcd_state, owners}' "$VM_WORK/cluster-B.json" 2>/dev/null) poll: $(grep '^sample ' \
		"$POLL" | tail -n 1)"
	return 1
}

if ! wait_stable owner; then
	vm_end
fi

# ---- the host: two sessions, multipathd with the docs' settings ----------------------------

# docs/CLUSTER.md: a short replacement_timeout, so a dead gateway's path fails quickly.
sessions() {
	vm_mpath_sessions "$IQN" "$GW_A" "$GW_B" || return 1
	# udev's events for the new disks; slow in an emulated guest on a busy host, and the map
	# below is retried until it shows up anyway.
	timeout 130 udevadm settle -t 120 || echo "udev queue not empty after 120 s (going on)"
	return 0
}

# The device section is docs/CLUSTER.md's ("Hosts: multipath.conf"), word for word; the
# defaults only let multipath take the disks without a WWID list (a rig has no history).
mpconf() {
	cat >/etc/multipath.conf <<-EOF
		defaults {
		    user_friendly_names yes
		    find_multipaths no
		    ${CLUSTER_POLLING:+polling_interval $CLUSTER_POLLING}
		}
	EOF
	sed -n '/^## Hosts: multipath.conf/,/^## /p' "$VM_LIB_DIR/../../../docs/CLUSTER.md" |
		sed -n '/^```$/,/^```$/p' | sed '1d;$d' >>/etc/multipath.conf
	cat /etc/multipath.conf
	grep -q 'prio  *alua' /etc/multipath.conf
}

MAP=
# map_json: multipathd's view of the maps, into $VM_WORK/maps.json.
map_json() {
	timeout 20 multipathd show maps json >"$VM_WORK/maps.json" 2>/dev/null
}

# map_healthy: two paths, both active and ready, in two groups of priority 50 (active/optimized)
# and 10 (active/non-optimized): ALUA as the alua prioritizer reads it.
map_healthy() {
	map_json || return 1
	[ "$(jq -r '[.maps[0].path_groups[].paths[] | select(.dm_st == "active" and
		.chk_st == "ready")] | length' "$VM_WORK/maps.json" 2>/dev/null)" = 2 ] &&
		[ "$(jq -c '[.maps[0].path_groups[].pri] | sort' "$VM_WORK/maps.json" 2>/dev/null)" = \
			"[10,50]" ]
}

map_summary() {
	jq -c '[.maps[0].path_groups[] | {pri, dm_st, paths: [.paths[] | [.dev, .dm_st, .chk_st, .pri]]}]' \
		"$VM_WORK/maps.json" 2>/dev/null | cut -c1-250
}

make_map() {
	local i
	for i in $(seq 1 24); do
		[ $((i % 4)) = 1 ] && VM_TMO=60 run multipath -v2
		MAP=$(timeout 10 dmsetup ls --target multipath 2>/dev/null | awk '{ print $1; exit }')
		[ -n "$MAP" ] && [ -b "/dev/mapper/$MAP" ] && return 0
		sleep 5
	done
	return 1
}

if ! check udevd vm_udevd_start || ! check iscsid vm_iscsid_start || ! check sessions sessions ||
	! check multipath.conf mpconf || ! check multipathd vm_mpathd_start || ! check map make_map
then
	vm_end
fi
if t_wait_for 60 map_healthy; then
	pass map-alua "$MAP: $(map_summary)"
else
	fail map-alua "$MAP: $(map_summary)"
	VM_TMO=20 run multipath -ll
	vm_end
fi
VM_TMO=20 run multipath -ll
# Each session's recovery_tmo (replacement_timeout above, fast_io_fail_tmo in multipath.conf):
# what the host waits before it fails a dead gateway's I/O over.
echo "=== recovery_tmo: $(grep -H . /sys/class/iscsi_session/session*/recovery_tmo 2>/dev/null | tr '\n' ' ')"

# ---- the writer -----------------------------------------------------------------------------

WR_PID=
writer_stop() {
	[ -n "$WR_PID" ] || return 0
	touch "$VM_WORK/io.stop"
	timeout 60 tail --pid="$WR_PID" -f /dev/null
	kill -KILL "$WR_PID" 2>/dev/null
	wait "$WR_PID" 2>/dev/null
	WR_PID=
}
python3 "$VM_LIB_DIR/failover-io.py" write "/dev/mapper/$MAP" 1 16 "$IOLOG" "$VM_WORK/io.stop" &
WR_PID=$!
vm_on_exit writer_stop

writes() {
	local n
	n=$(grep -c '^t ' "$IOLOG" 2>/dev/null)
	echo "${n:-0}"
}

# writes_beyond N: more than N writes completed.
writes_beyond() {
	[ "$(writes)" -gt "$1" ]
}

# io_goes_on NAME: 40 more writes complete within 90 s of now.
io_goes_on() {
	local n
	n=$(writes)
	if t_wait_for 90 writes_beyond $((n + 40)); then
		pass "$1" "$(($(writes) - n)) writes since"
	else
		fail "$1" "$(($(writes) - n)) writes in 90 s; $(grep -c '^err' "$IOLOG") errors: $(grep '^err' "$IOLOG" | tail -n 2)"
	fi
}

io_goes_on io-before
event start

# takeover NAME NEWOWNER: the other gateway becomes the owner (a sanity bound: the lease, a
# poll, the hold of TTL + margin, times two).
takeover() {
	local t0=$SECONDS
	if t_wait_for $((TTL * 4 + 20)) owner_is "$2"; then
		pass "$1-takeover" "gateway $2 optimized $((SECONDS - t0)) s after the fault (poll)"
	else
		fail "$1-takeover" "gateway $2 not optimized after $((TTL * 4 + 20)) s: $(tail -n 1 "$POLL")"
	fi
}

# healed NAME: exactly one gateway optimized again, and the map's two paths back.
healed() {
	wait_stable "$1-settled"
	if t_wait_for 90 map_healthy; then
		pass "$1-paths" "$(map_summary)"
	else
		fail "$1-paths" "$(map_summary)"
		VM_TMO=20 run multipath -ll
	fi
}

# (0) kill -9 of the owner's gateway alone: its agent lives on -------------------------------
# The agent keeps renewing the membership, so the LUN does not move: no gateway is optimized
# until the gateway is back (as systemd would restart it), and the host writes through the
# other gateway's non-optimized path meanwhile. What is checked is the host's side: the writes
# go on and the paths come back.
wait_stable gwkill-ready || vm_end
O=$OWNER
P=$(other "$O")
line=$(($(wc -l <"$POLL") + 1))
echo "=== gwkill: owner $O, kill -9 of its gateway (pid ${GW_PID[$O]}) alone"
event "gwkill-$O"
kill -KILL "${GW_PID[$O]}"
wait "${GW_PID[$O]}" 2>/dev/null
io_goes_on gwkill-io
echo "=== gwkill: gateway $P's states since: $(seen_since "$line" "$P")"
event "gwback-$O"
if gw_up "$O"; then
	pass gwback "gateway $O started again under its agent"
else
	fail gwback "gateway $O did not start again"
fi
healed gwback
io_goes_on gwback-io

# (1) kill -9 of the owner's gateway and agent ----------------------------------------------
wait_stable kill-ready || vm_end
O=$OWNER
P=$(other "$O")
echo "=== kill: owner $O, kill -9 of its gateway (pid ${GW_PID[$O]}) and agent (pid ${AG_PID[$O]})"
event "kill-$O"
kill -KILL "${GW_PID[$O]}" "${AG_PID[$O]}"
wait "${GW_PID[$O]}" "${AG_PID[$O]}" 2>/dev/null
takeover kill "$P"
io_goes_on kill-io
event "rejoin-$O"
if gw_up "$O" && agent_up "$O"; then
	pass rejoin "gateway and agent $O started again"
else
	fail rejoin "gateway or agent $O did not start again"
fi
healed rejoin
io_goes_on rejoin-io

# (2) the owner's agent cut from etcd, its gateway still reached by the host ----------------
# iptables is Debian's nftables flavour; the legacy one if the guest's nf_tables will not do.
IPT=iptables
modprobe nf_tables 2>/dev/null
if ! iptables -S INPUT >/dev/null 2>&1; then
	IPT=iptables-legacy
	vm_modprobe x_tables ip_tables iptable_filter xt_tcpudp
fi
# cut_rules -I|-D ADDR: both directions of etcd's traffic on ADDR.
cut_rules() {
	$IPT "$1" INPUT -d "$2" -p tcp --dport 2379 -j DROP &&
		$IPT "$1" INPUT -s "$2" -p tcp --sport 2379 -j DROP
}
wait_stable cut-ready || vm_end
O=$OWNER
P=$(other "$O")
if [ "$O" = A ]; then CUT=$ETCD_A; else CUT=$ETCD_B; fi
line=$(($(wc -l <"$POLL") + 1))
sess_before=$(iscsiadm -m session 2>/dev/null | wc -l)
event "cut-$O"
if check cut-rules cut_rules -I "$CUT"; then
	vm_on_exit "cut_rules -D $CUT 2>/dev/null"
	echo "=== cut: owner $O, its agent's etcd traffic ($CUT:2379) dropped with $IPT"
	takeover cut "$P"
	# (The poller's "down" right after a state change is its RTPG meeting the unit attention
	# the change raised: it logs in again. Whether the host still reaches the gateway is the
	# sessions check below.)
	st=$(seen_since "$line" "$O")
	if grep -q standby <<<"$st" && kill -0 "${GW_PID[$O]}" 2>/dev/null; then
		pass cut-fenced "gateway $O fenced itself and runs on (its states since the cut: $st)"
	else
		fail cut-fenced "gateway $O's states since the cut: $st"
	fi
	if kill -0 "${AG_PID[$O]}" 2>/dev/null; then
		pass cut-agent "agent $O still runs"
	else
		fail cut-agent "agent $O exited: $(tail -n 3 "$VM_WORK/agent-$O.log")"
	fi
	io_goes_on cut-io
	event "heal-$O"
	check cut-lifted cut_rules -D "$CUT"
	healed heal
	io_goes_on heal-io
	n=$(iscsiadm -m session 2>/dev/null | wc -l)
	if [ "$n" = "$sess_before" ]; then
		pass sessions "both still logged in"
	else
		fail sessions "$n sessions, $sess_before before the cut"
	fi
fi
event end
VM_TMO=20 run multipath -ll

# ---- the verdict ----------------------------------------------------------------------------

writer_stop
if grep -q '^done [0-9]* 0$' "$IOLOG"; then
	pass "io-errors" "$(awk '$1 == "done" { print $2 }' "$IOLOG") writes, each read back; the final pass read every block as its last write: no I/O error, no mismatch"
else
	fail "io-errors" "$(tail -n 1 "$IOLOG"); $(grep '^err' "$IOLOG" | head -n 3)"
fi
poll_stop
N=$(grep -c '^sample ' "$POLL")
BOTH=$(awk '$1 == "sample" && $3 == "ao" && $4 == "ao"' "$POLL" | wc -l)
if [ "$BOTH" = 0 ] && [ "$N" -gt 100 ]; then
	pass one-optimized "at no sample were both gateways optimized ($N samples)"
else
	fail one-optimized "$BOTH of $N samples with both optimized"
fi

# Per event, the longest pause between two completed writes from the event to the next one,
# and when the writes had resumed from that pause, counted from the event.
python3 - "$EVENTS" "$IOLOG" "$TTL" "multipathd polling_interval ${CLUSTER_POLLING:-5 (default)} s" \
	>"$VM_WORK/stalls.txt" <<'EOF'
import sys
ev = [(l.split()[0], float(l.split()[1])) for l in open(sys.argv[1])]
done = [float(l.split()[1]) for l in open(sys.argv[2]) if l.startswith("t ")]
print("event       stall_s resumed_after_s writes (lease TTL %s s, %s)" % (sys.argv[3], sys.argv[4]))
for i, (name, t0) in enumerate(ev[:-1]):
    if name == "start":
        continue
    end = ev[i + 1][1]
    prev = max([d for d in done if d <= t0], default=t0)
    after = [d for d in done if t0 < d <= end]
    if not after:
        print("%-11s     inf               - 0" % name)
        continue
    gap, gap_end, a = after[0] - prev, after[0], prev
    for d in after:
        if d - a > gap:
            gap, gap_end = d - a, d
        a = d
    print("%-11s %7.2f %15.2f %d" % (name, gap, gap_end - t0, len(after)))
EOF
cat "$VM_WORK/stalls.txt"
cp "$VM_WORK/stalls.txt" "$VM_SHARE/cluster-mpath.txt" 2>/dev/null
while read -r name stall resumed n; do
	case "$name" in gwkill-* | gwback-* | kill-* | cut-* | rejoin-* | heal-*) ;; *) continue ;; esac
	if [ "$stall" != inf ] && awk -v s="$stall" -v m="$STALL_MAX" 'BEGIN { exit !(s < m) }'; then
		pass "stall-$name" "longest pause ${stall} s, writes resumed ${resumed} s after the event ($n writes until the next; lease $TTL s)"
	else
		fail "stall-$name" "longest pause ${stall} s (bound $STALL_MAX s)"
	fi
done <"$VM_WORK/stalls.txt"
# Fences beyond the faults' own are late renewals (a busy emulated guest): they show as stalls.
for g in A B; do
	echo "=== gateway $g fenced itself $(grep -c 'fenced: no lease renewal' "$VM_WORK/gw-$g.log") times"
done
# The run's record, kept whatever the verdict (a failure keeps the whole work folder anyway).
mkdir -p "$VM_SHARE/logs/cluster-mpath"
cp "$POLL" "$IOLOG" "$EVENTS" "$VM_WORK"/stalls.txt "$VM_WORK"/gw-*.log "$VM_WORK"/agent-*.log \
	"$VM_WORK"/etcd.log "$VM_WORK"/multipathd.log "$VM_SHARE/logs/cluster-mpath/" 2>/dev/null
vm_end

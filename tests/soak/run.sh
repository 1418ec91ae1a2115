#!/bin/bash
# `make soak`: the gateway under a long mixed load with everything around it changing, to find
# what short suites miss: leaks, slow growth, rare races. For SOAK_SECS (default 1800; the old
# name SOAK_SECONDS still works), in rounds of about SOAK_ROUND_SECS, against one gateway:
#
#   ns GW: isergwd, its hosts   --veth gS1--> ns BE: one tgtd, portals 10.211.1.2 and
#                               --veth gS2-->        10.211.2.2, serving one file
#
#   - data: isergw-verify runs back to back (each a login, random writes up to 1 MiB or 4 MiB
#     read back at once, random re-reads, the whole span re-read at the end, and a logout; a new
#     seed for every run) on LUN 0, a remote LUN over the two paths to tgtd, and on LUN 1, a
#     file LUN; short runs on LUN 2 (RAM) for many logins and logouts; random 4 KiB reads at
#     QD 32 (isergw-bench) beside them; discovery (iscsi-ls) each round;
#   - path flaps: one back-end path at a time loses its link each round, until the gateway has
#     seen it fail and SOAK_FLAP_SECS (3) more, while the remote LUN carries I/O (the other path
#     serves; never both down);
#   - configuration through the agent's REST API: on ANOTHER target, a LUN added and removed
#     and an ACL entry added and removed each round, each seen in the gateway's state (on the
#     soak's own target hosts would rightly get REPORTED LUNS DATA HAS CHANGED);
#   - the agent restarts every SOAK_AGENT_EVERY rounds (SIGKILL and SIGTERM in turn) in the
#     rounds that start within SOAK_AGENT_RESTART_SECS (SOAK_SECS / 2), and the gateway serves
#     on; the agent started last then runs to the end, so that its bounds compare one process.
#
# Pass: every write verified (zero data errors, no command failed), the gateway never died;
# the RSS of the gateway and the agent and their open file descriptors flat after warm-up
# (measured at the end of each round with no client left; bounds below); the gateway's heap
# outside data buffers flat too (its control socket's heap.in_use, glibc's mallinfo2, less
# data_memory.used, the task cache's buffers, and pdu_cache.bytes, what the PDU pools keep:
# what a leak of sessions, tasks, PDUs or config objects would grow); at the end, with the clients gone, the gateway's own counters back to
# rest: no session, no connection, no task, no PDU in use, data memory no more than the task
# cache holds, in its control-socket state and in the agent's /metrics. A sanitizer report
# (BUILD=build/san) fails it too. Each round logs where the memory is: RSS split into anonymous,
# file and shmem pages, and the heap's arena, in use and free (docs/RELIABILITY.md reads them).
#
# Bounds (environment): SOAK_RSS_GROWTH_PCT (10) percent or SOAK_RSS_SLACK_KB (8192) kB
# (15 and 16384 for sanitized builds: ASan's quarantine), whichever is larger, of RSS growth
# from the end of warm-up to the end (8 MiB: the RAM LUN's written span may still be filling),
# for the gateway on top of what it keeps for reuse grew by (malloc's free heap and the task
# cache's buffers, bounded by the peak of data in flight: docs/RELIABILITY.md);
# SOAK_HEAP_SLACK_KB (1024) kB of growth of the heap outside data buffers (not checked without
# glibc's figures: sanitized builds, another libc); SOAK_FD_SLACK (2) more open fds at most.
# Warm-up: the rounds that end within SOAK_WARMUP_SECS (SOAK_SECS / 6: malloc's heap reaches its working size
# in the first minutes, 60 MB in 4-5 minutes at load 10-20) and at least SOAK_WARMUP rounds (2);
# for the agent also the round of its last restart and the next one. Each bound needs a round
# measured after its warm-up, by the same process at both ends (a failure otherwise: a bound
# over no round, or over two processes, cannot trip); the soak runs up to 3 rounds past
# SOAK_SECS until both have one.
# The figures print as one "soak-figures:" line for docs/RELIABILITY.md.
#
# SOAK_TRANSPORT=iser (`make soak SOAK_TRANSPORT=iser`, which runs this inside the VM rig:
# tests/vm/guest/suite-soak-iser.sh) carries the hosts' I/O over iSER instead: the gateway gets
# an iSER portal on SOAK_ISER_ADDR, an address with an RDMA device on it (rxe in the guest), and
# runs in the current network namespace, not one of its own (rxe in Linux 6.1 receives only in
# the root namespace), with its TCP portal on the same address; isergw-verify on all three LUNs
# and isergw-bench use iser:// URLs, with commands of at most 256 KiB (libiscsi 1.19's iSER
# limit), and the random reads at QD 8, not 32; discovery stays on TCP (iscsi-ls takes iscsi://
# only). The tools wait for their commands in a loop of their own (tests/tools/tool_sync.h):
# libiscsi 1.19's synchronous calls fail any iSER command without a completion within 1 s
# ("revents is not POLLIN"), which a path flap's queued commands, or a TCG guest descheduled by
# a loaded host, exceed. A command still fails after isergw-verify's per-command timeout (30 s).
# (MALLOC_PERTURB_=255, which keeps libiscsi's iSER connect from reading stale heap, makes its
# logout abort on a freed futex instead: not used.) At rest the iSER portal must also hold no
# connection, QP, memory region, or data buffer in use or lent.
#
# Latency, as evidence for what a slow command was: the slowest command each isergw-verify saw
# (and each of 1 s or more, logged with its time), isergw-bench's max_lat_us and max_gap_us, the
# gateway's own per-LUN latency histograms (its slowest bucket), and a stall meter: a process
# beside them that sleeps 100 ms at a time and logs every oversleep of 0.5 s or more (the whole
# machine, or the VM guest, not running). They print on the "soak-figures:" line.
#
#   make soak                               release build, 30 minutes
#   make soak SOAK_TRANSPORT=iser           the same over iSER in the VM rig
#   SOAK_SECS=180 tests/soak/run.sh         what `make test` runs (tests/integration/test_soak.sh)
#   SOAK_SECS=60 BUILD=build/san tests/soak/run.sh
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/mpath.sh"
. "$(dirname "$0")/../lib/api.sh"

SOAK_SECS=${SOAK_SECS:-${SOAK_SECONDS:-1800}}
SOAK_ROUND_SECS=${SOAK_ROUND_SECS:-30}
SOAK_FLAP_SECS=${SOAK_FLAP_SECS:-3}
SOAK_AGENT_EVERY=${SOAK_AGENT_EVERY:-2}
SOAK_AGENT_RESTART_SECS=${SOAK_AGENT_RESTART_SECS:-$((SOAK_SECS / 2))}
SOAK_WARMUP=${SOAK_WARMUP:-2}
SOAK_WARMUP_SECS=${SOAK_WARMUP_SECS:-$((SOAK_SECS / 6))}
SOAK_HEAP_SLACK_KB=${SOAK_HEAP_SLACK_KB:-1024}
# Sanitized builds: ASan's quarantine holds freed memory for a while (RSS is no leak test
# there: LeakSanitizer is) and malloc's figures are not the allocator's: the old, wider bound.
case "${BUILD:-build}" in
*san)
	SOAK_RSS_GROWTH_PCT=${SOAK_RSS_GROWTH_PCT:-15} SOAK_RSS_SLACK_KB=${SOAK_RSS_SLACK_KB:-16384}
	HEAP_FIGURES=0
	;;
*)
	SOAK_RSS_GROWTH_PCT=${SOAK_RSS_GROWTH_PCT:-10} SOAK_RSS_SLACK_KB=${SOAK_RSS_SLACK_KB:-8192}
	HEAP_FIGURES=1
	;;
esac
# glibc's per-thread caches (tcache: up to 7 freed chunks per size up to 1 KiB, about 240 KiB a
# thread) count as in use in mallinfo2, and fill over minutes as each loop and worker thread
# frees chunks of rarer sizes: with two loops the heap outside data buffers grew some 30 kB a
# round from that alone, flat with them off. The soak's gateway runs without them, so that
# figure is what the gateway holds.
GW_TUNABLES=glibc.malloc.tcache_count=0${GLIBC_TUNABLES:+:$GLIBC_TUNABLES}
SOAK_FD_SLACK=${SOAK_FD_SLACK:-2}
SOAK_TRANSPORT=${SOAK_TRANSPORT:-tcp}

t_begin soak
VERIFY=$T_TOOLS/isergw-verify
BENCH=$T_TOOLS/isergw-bench
AGENT=$T_BUILD/isergw-agent
SFX=$$
NS_GW=skgw$SFX NS_BE=skbe$SFX
IQN=iqn.2026-11.org.isergw:soak
IQN2=iqn.2026-11.org.isergw:soak-other
IQN_BE=iqn.2026-11.org.isergw:soak-backend
HOST3=iqn.2026-11.org.isergw:soak-host3
HOST4=iqn.2026-11.org.isergw:soak-host4
trap 'sk_rc=$?; t_stop_all; mp_cleanup_ns; ( exit $sk_rc ); t_exit_trap' EXIT

if [ "$TARGET" != isergwd ]; then
	skip soak "the soak checks the gateway's own counters and agent (TARGET=$TARGET)"
	t_end
fi
if [ "$(id -u)" != 0 ] || ! t_need ip tgtd tgtadm curl; then
	skip soak "needs root, ip, tgt and curl"
	t_end
fi
for b in "$VERIFY" "$BENCH" "$AGENT" "$T_BUILD/isergwd"; do
	if [ ! -x "$b" ]; then
		fail build "$b is missing (make test-build)"
		t_end
	fi
done
case "$SOAK_TRANSPORT" in
tcp) ISER=0 ;;
iser)
	ISER=1
	if [ -z "${SOAK_ISER_ADDR:-}" ] || ! ip -o addr show | grep -q " ${SOAK_ISER_ADDR}/"; then
		fail transport "SOAK_TRANSPORT=iser needs SOAK_ISER_ADDR, an address here with an RDMA device (run it in the VM rig: make soak SOAK_TRANSPORT=iser)"
		t_end
	fi
	;;
*)
	fail transport "SOAK_TRANSPORT is tcp or iser, not '$SOAK_TRANSPORT'"
	t_end
	;;
esac
if [ $ISER = 1 ]; then
	# rxe receives only in the root network namespace: the gateway stays in this one.
	NS_GW=
elif ! ip netns add "$NS_GW" 2>/dev/null; then
	skip soak "cannot create network namespaces here"
	t_end
else
	NS_MADE+=("$NS_GW")
fi
# gw_ip ARGS: ip(8) in the gateway's namespace; "${IN_GW[@]}" CMD...: CMD there (exec'd).
gw_ip() {
	if [ -n "$NS_GW" ]; then
		ip -n "$NS_GW" "$@"
	else
		ip "$@"
	fi
}
IN_GW=()
[ -n "$NS_GW" ] && IN_GW=(ip netns exec "$NS_GW")

# ---- the back end: one tgtd over two paths ------------------------------------------------

# sk_link GW-IF GW-ADDR BE-IF BE-ADDR: a veth pair between the gateway's namespace and NS_BE.
sk_link() {
	if [ -n "$NS_GW" ]; then
		mp_link "$1" "$2" "$NS_BE" "$3" "$4"
		return
	fi
	ip link add "$1$SFX" type veth peer name "$3$SFX" netns "$NS_BE" &&
		ip addr add "$2/24" dev "$1$SFX" && ip link set "$1$SFX" up &&
		ip -n "$NS_BE" addr add "$4/24" dev "$3$SFX" && ip -n "$NS_BE" link set "$3$SFX" up
}
sk_net() {
	ip netns add "$NS_BE" || return 1
	NS_MADE+=("$NS_BE")
	ip -n "$NS_BE" link set lo up && gw_ip link set lo up || return 1
	sk_link gS1 10.211.1.1 bS1 10.211.1.2 || return 1
	sk_link gS2 10.211.2.1 bS2 10.211.2.2
}
if ! sk_net >"$T_DIR/net.log" 2>&1; then
	fail network "$(tail -n 3 "$T_DIR/net.log" | tr '\n' ' ')"
	t_end
fi
truncate -s 256M "$T_SHM/be.img"
if ! mp_tgtd be "$NS_BE" "$IQN_BE" "$T_SHM/be.img" soak-be 10.211.1.2:3260 10.211.2.2:3260; then
	fail tgtd "see $T_DIR/tgtadm-be.log"
	t_end
fi

# ---- the gateway (ns GW) and the agent ----------------------------------------------------

CTL_SOCK=$T_DIR/ctl.sock
truncate -s 512M "$T_SHM/lun1.img"
# The portal hosts reach: 127.0.0.1, or the iSER address (the same address and port for both
# transports, as a host's discovery names one address).
GW_ADDR=127.0.0.1
[ $ISER = 1 ] && GW_ADDR=$SOAK_ISER_ADDR
PORTALS="{ \"name\": \"tcp0\", \"transport\": \"tcp\", \"address\": \"$GW_ADDR\", \"port\": 3260 }"
TPORTALS='["tcp0"]'
if [ $ISER = 1 ]; then
	PORTALS="$PORTALS, { \"name\": \"iser0\", \"transport\": \"iser\", \"address\": \"$GW_ADDR\", \"port\": 3260 }"
	TPORTALS='["tcp0", "iser0"]'
fi
cat >"$T_DIR/gw.json" <<EOF
{ "gateway": { "control_socket": "$CTL_SOCK" },
  "portals": [ $PORTALS ],
  "targets": [
    { "name": "$IQN", "portals": $TPORTALS, "allow_any_initiator": true,
      "luns": [
        { "lun": 0, "backstore": { "type": "remote", "block_size": 512,
          "path_grouping_policy": "multibus", "path_selector": "round-robin",
          "no_path_retry": "queue", "polling_interval": 1, "reconnect_delay_ms": 200,
          "reconnect_max_ms": 2000, "login_timeout": 2,
          "paths": [ { "url": "iscsi://10.211.1.2:3260/$IQN_BE/1" },
                     { "url": "iscsi://10.211.2.2:3260/$IQN_BE/1" } ] } },
        { "lun": 1, "backstore": { "type": "file", "path": "$T_SHM/lun1.img", "size": "512M",
          "block_size": 512 } },
        { "lun": 2, "backstore": { "type": "ram", "size": "16M" } } ] },
    { "name": "$IQN2", "portals": ["tcp0"], "allow_any_initiator": false,
      "initiators": [ { "name": "$HOST3" } ],
      "luns": [ { "lun": 0, "backstore": { "type": "ram", "size": "16M" } } ] } ] }
EOF
ASAN_OPTIONS="log_path=$T_DIR/san/asan:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
	UBSAN_OPTIONS="log_path=$T_DIR/san/ubsan:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
	GLIBC_TUNABLES=$GW_TUNABLES t_daemon_start isergwd isergwd "$T_DIR/gw.log" \
	"${IN_GW[@]}" "$T_BUILD/isergwd" --config "$T_DIR/gw.json"
GW=$T_LAST_PID
for i in $(seq 1 300); do
	grep -q 'main: ready' "$T_DIR/gw.log" 2>/dev/null && break
	t_alive "$GW" || break
	sleep 0.1
done
if ! grep -q 'main: ready' "$T_DIR/gw.log"; then
	fail start "the gateway did not get ready: $(tail -n 3 "$T_DIR/gw.log" | tr '\n' ' ')"
	t_end
fi

state() { gw_ctl "$CTL_SOCK" '{"op":"state"}' >"$T_DIR/state.json" 2>/dev/null; }
# sq EXPR: a python expression over s, the last state reply.
sq() { python3 -c "import json; s=json.load(open('$T_DIR/state.json')); print($1)" 2>/dev/null; }
paths_active() {
	state && [ "$(sq "sum(p['state'] == 'active' for p in
		s['targets'][0]['luns'][0]['status']['paths'])")" = 2 ]
}
# path_down N: the gateway's state shows path N (1 or 2) of the remote LUN not active.
path_down() {
	state && [ "$(sq "s['targets'][0]['luns'][0]['status']['paths'][$1 - 1]['state']")" != active ]
}
if wait_for 30 paths_active; then
	pass "the remote LUN is up over both back-end paths"
else
	fail "remote LUN paths" "$(sq "s['targets'][0]['luns'][0].get('status')" | head -c 400)"
	t_end
fi

API_PORT=$(t_free_port)
API_URL=http://127.0.0.1:$API_PORT
AGENT_PID=
agent_start() {
	ASAN_OPTIONS="log_path=$T_DIR/san/asan-agent${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
		UBSAN_OPTIONS="log_path=$T_DIR/san/ubsan-agent${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
		t_daemon_start agent agent "$T_DIR/agent.log.$1" "$AGENT" --state-dir "$T_DIR/agent" \
		--listen "127.0.0.1:$API_PORT" --gateway-socket "$CTL_SOCK"
	AGENT_PID=$T_LAST_PID
	t_wait_port "$AGENT_PID" "$API_PORT" 20 && ADMIN=$(cat "$T_DIR/agent/admin.token")
}
metric() {
	curl -s -m 10 -H "Authorization: Bearer $ADMIN" "$API_URL/metrics" >"$T_DIR/metrics.txt" &&
		awk -v n="$1" '$1 == n {print $2}' "$T_DIR/metrics.txt"
}
applied() {
	local g a
	g=$(metric isergw_config_generation) a=$(awk '$1 == "isergw_config_applied_generation" \
		{print $2}' "$T_DIR/metrics.txt")
	[ -n "$g" ] && [ "$g" = "$a" ] && [ "$(awk '$1 == "isergw_gateway_up" {print $2}' \
		"$T_DIR/metrics.txt")" = 1 ]
}
if ! agent_start 0 || ! wait_for 30 applied; then
	fail "agent start" "$(tail -n 3 "$T_DIR/agent.log.0" | tr '\n' ' ')"
	t_end
fi
pass "the agent adopted the running configuration"

# ---- the figures ----------------------------------------------------------------------------

rss_of() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null; }
fds_of() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
GW_RSS0= GW_FD0= AG_RSS0= AG_FD0= GW_HEAP0= GW_KEPT0=
# mem_of PID: where its RSS is (kB): anonymous (heap, stacks, the RAM LUNs' written pages),
# file-backed (binaries, libraries) and shmem (tmpfs pages it maps: none here).
mem_of() {
	awk '/^(RssAnon|RssFile|RssShmem):/ {
		printf "%s%s %s", n++ ? " " : "", tolower(substr($1, 4, length($1) - 4)), $2 }' \
		"/proc/$1/status" 2>/dev/null
}
# heap_of: the gateway's heap (kB), from its state: arena (what malloc has from the kernel),
# mmapped (its blocks mapped on their own), in_use, free (kept by malloc for reuse), data (the
# task cache's buffers), pdus (the PDU pools' free PDUs and their buffers; data and pdus are part
# of in_use) and other (in_use less data and pdus: the figure a leak grows).
# Empty without mallinfo2, or in a sanitized build (its allocator is not glibc's).
heap_of() {
	[ "$HEAP_FIGURES" = 1 ] && state &&
		sq "'arena %d mmapped %d in_use %d free %d data %d pdus %d other %d' % (
		s['heap']['arena'] // 1024, s['heap']['mmapped'] // 1024,
		s['heap']['in_use'] // 1024, s['heap']['free'] // 1024,
		s['data_memory']['used'] // 1024, s['pdu_cache']['bytes'] // 1024,
		(s['heap']['in_use'] - s['data_memory']['used'] - s['pdu_cache']['bytes']) // 1024)
		if s['heap'].get('arena') else ''"
}
# heap_field NAME: one of heap_of's figures (kB), or nothing.
heap_field() {
	heap_of | awk -v n="$1" '{ for (i = 1; i < NF; i += 2) if ($i == n) print $(i + 1) }'
}
# heap_kept: what the gateway keeps for reuse (kB): malloc's free heap, the task cache's data
# buffers and the PDU pools (each bounded: by the peak of data in flight, ISC_PDU_KEPT_MAX per
# loop); nothing without heap figures.
heap_kept() {
	heap_of | awk '{ for (i = 1; i < NF; i += 2)
			if ($i == "free" || $i == "data" || $i == "pdus") k += $(i + 1) }
		NF { print k }'
}

# The stall meter: the longest oversleep of a 100 ms sleep (ms), how many of 0.5 s and of 1 s or
# more, rewritten every second to $T_DIR/stall; each stall of 0.5 s or more with its time in
# $T_DIR/stall.log.
t_daemon_start stall meter "$T_DIR/stall.log" python3 -u -c '
import os, sys, time
out = sys.argv[1]
mx = 0.0
n05 = n1 = 0
last = 0.0
while True:
    t = time.monotonic()
    time.sleep(0.1)
    d = time.monotonic() - t - 0.1
    mx = max(mx, d)
    if d >= 0.5:
        n05 += 1
        n1 += d >= 1.0
        print("stall %.3f s ending %s UTC" % (d, time.strftime("%H:%M:%S", time.gmtime())))
    if time.monotonic() - last >= 1.0:
        last = time.monotonic()
        with open(out + ".new", "w") as f:
            f.write("%.0f %d %d\n" % (mx * 1000, n05, n1))
        os.replace(out + ".new", out)
' "$T_DIR/stall"

# ---- one round --------------------------------------------------------------------------------

DATA=iscsi://$GW_ADDR:3260
# The largest command: 1 MiB (remote LUN) and 4 MiB (file LUN) over TCP, libiscsi's iSER limit
# of 256 KiB over iSER.
MAX0=1M MAX1=4M BENCH_QD=32
if [ $ISER = 1 ]; then
	DATA=iser://$GW_ADDR:3260 MAX0=256K MAX1=256K BENCH_QD=8
fi
URL0=$DATA/$IQN/0
URL1=$DATA/$IQN/1
URL2=$DATA/$IQN/2
WARM=0 ROUNDS=0 FLAPS=0 CHANGES=0 RESTARTS=0 LOGINS=0 WRITES=0 READS=0 BLOCKS=0 MISMATCH=0 BAD=0
# Latency figures: the slowest isergw-verify command (ms) and how many took 1 s or more, per
# loop; isergw-bench's slowest read and longest time without a completion (ms).
declare -A SLOW_MS=([remote]=0 [file]=0 [churn]=0) SLOW_N=([remote]=0 [file]=0 [churn]=0)
BENCH_LAT_MS=0 BENCH_GAP_MS=0
: >"$T_DIR/slow.log"

# verify_counts FILE: adds its "verify:" line to the totals; 1 when it has none.
verify_counts() {
	local l
	l=$(grep -E '^verify: [0-9]+ writes' "$1" | tail -n 1)
	[ -n "$l" ] || return 1
	set -- $(printf '%s' "$l" | sed 's/verify: \([0-9]*\) writes.* \([0-9]*\) reads.* \([0-9]*\) blocks compared, \([0-9]*\) mismatches.*/\1 \2 \3 \4/')
	WRITES=$((WRITES + $1)) READS=$((READS + $2)) BLOCKS=$((BLOCKS + $3))
	MISMATCH=$((MISMATCH + $4))
}

# config_churn R: on the other target, a LUN and an ACL entry added through REST, each seen in
# the gateway's state, then removed again, each seen gone.
lun_count() { state && sq "len([l for t in s['targets'] if t['name'] == '$IQN2' for l in t['luns'] if l['lun'] == $1])"; }
has_lun() { [ "$(lun_count "$1")" = 1 ]; }
no_lun() { [ "$(lun_count "$1")" = 0 ]; }
config_churn() {
	local r=$1 lun=$((1 + $1 % 7)) acl=iqn.2026-11.org.isergw:soak-acl-$1
	api POST "/api/v1/targets/$IQN2/luns" "{\"lun\":$lun,\"backstore\":{\"type\":\"ram\",\"size\":\"8M\"}}"
	[ "$CODE" = 201 ] || { echo "round $r: POST lun $lun: HTTP $CODE $(head -c 200 "$T_DIR/body")"; return 1; }
	wait_for 20 has_lun "$lun" || { echo "round $r: LUN $lun never reached the gateway"; return 1; }
	api POST "/api/v1/targets/$IQN2/acls" "{\"name\":\"$acl\"}"
	[ "$CODE" = 201 ] || { echo "round $r: POST acl: HTTP $CODE $(head -c 200 "$T_DIR/body")"; return 1; }
	wait_for 20 applied || { echo "round $r: the ACL was not applied"; return 1; }
	api DELETE "/api/v1/targets/$IQN2/acls/$acl"
	case "$CODE" in 200 | 204) ;; *) echo "round $r: DELETE acl: HTTP $CODE"; return 1 ;; esac
	api DELETE "/api/v1/targets/$IQN2/luns/$lun"
	case "$CODE" in 200 | 204) ;; *) echo "round $r: DELETE lun: HTTP $CODE"; return 1 ;; esac
	wait_for 30 no_lun "$lun" || { echo "round $r: LUN $lun never left the gateway"; return 1; }
	wait_for 20 applied || { echo "round $r: the removals were not applied"; return 1; }
	CHANGES=$((CHANGES + 4))
}

# agent_restart N: SIGKILL on odd restarts, SIGTERM (a clean exit checked) on even ones.
agent_restart() {
	if [ $(($1 % 2)) = 1 ]; then
		kill -KILL "$AGENT_PID" || { echo "kill -KILL of the agent failed"; return 1; }
		t_stop_pid "$AGENT_PID" 5
		[ "$T_STOP_RC" = 137 ] || { echo "the agent did not die of SIGKILL: status $T_STOP_RC"; return 1; }
	else
		t_stop_checked "$AGENT_PID" agent || return 1
	fi
	agent_start "$1" && wait_for 30 applied
}

# io_loop NAME SEED INITIATOR URL VERIFY-ARGS...: isergw-verify runs back to back, a new seed
# each (every run a login and a logout), until $T_DIR/round.stop appears; stops at the first
# failed run. Outputs go to $T_DIR/NAME.N; the number of runs to $T_DIR/NAME.runs.
io_loop() {
	local name=$1 seed=$2 ini=$3 url=$4 n=0
	shift 4
	rm -f "$T_DIR/$name".*
	while [ ! -e "$T_DIR/round.stop" ]; do
		n=$((n + 1))
		echo "$n" >"$T_DIR/$name.runs"
		if ! timeout -k 5 300 "${IN_GW[@]}" "$VERIFY" -q -i "$ini" \
			-s "$((seed + n))" "$@" "$url" >"$T_DIR/$name.$n" 2>&1; then
			echo "$name run $n (seed $((seed + n))): $(tail -n 3 "$T_DIR/$name.$n" | tr '\n' ' ')"
			return 1
		fi
	done
}

# io_counts NAME: adds the verify lines of NAME's runs to the totals; 1 when one has none.
io_counts() {
	local i runs ms n
	runs=$(cat "$T_DIR/$1.runs" 2>/dev/null || echo 0)
	for i in $(seq 1 "$runs"); do
		verify_counts "$T_DIR/$1.$i" || { echo "$1 run $i printed no verify line"; return 1; }
		LOGINS=$((LOGINS + 1))
		# (No process substitution here: the VM guest has no /dev/fd.)
		read -r ms n <<<"$(sed -n 's/^verify: [0-9]* writes.*slowest command \([0-9.]*\) s, \([0-9]*\) of .*/\1 \2/p' \
			"$T_DIR/$1.$i" | awk '{printf "%d %d\n", $1 * 1000 + 0.5, $2}')"
		# Each command of 1 s or more, with its time, for the log.
		sed -n "s/^verify: slow: /$1: /p" "$T_DIR/$1.$i" >>"$T_DIR/slow.log"
		[ -n "${ms:-}" ] || continue
		[ "$ms" -gt "${SLOW_MS[$1]}" ] && SLOW_MS[$1]=$ms
		SLOW_N[$1]=$((SLOW_N[$1] + n))
	done
}
# bench_counts R: isergw-bench's max_lat_us and max_gap_us of round R into the maxima.
bench_counts() {
	local lat gap
	read -r lat gap <<<"$(sed -n 's/^bench: .* max_lat_us=\([0-9]*\) max_gap_us=\([0-9]*\) .*/\1 \2/p' \
		"$T_DIR/bench.$1")"
	sed -n 's/^bench: slow: /bench: /p' "$T_DIR/bench.$1" >>"$T_DIR/slow.log"
	[ -n "${lat:-}" ] || return 0
	[ $((lat / 1000)) -gt "$BENCH_LAT_MS" ] && BENCH_LAT_MS=$((lat / 1000))
	[ $((gap / 1000)) -gt "$BENCH_GAP_MS" ] && BENCH_GAP_MS=$((gap / 1000))
}

round() {
	local r=$1 p=$(( ($1 % 2) + 1 )) l0 l1 l2 bp ok=1 t0=$SECONDS
	rm -f "$T_DIR/round.stop"
	# The seeds differ per round and per run: nothing written earlier can pass for new data.
	io_loop remote $((r * 100000)) "$T_INI1" "$URL0" -n 60 -m "$MAX0" -S 128M &
	l0=$!
	io_loop file $((r * 100000 + 50000)) "$HOST4" "$URL1" -n 40 -m "$MAX1" -S 384M &
	l1=$!
	# Short sessions: many logins and logouts.
	io_loop churn $((r * 100000 + 90000)) "$HOST3" "$URL2" -n 4 -m 64K -S 8M &
	l2=$!
	"${IN_GW[@]}" "$BENCH" -q "$BENCH_QD" -b 4096 -t "$SOAK_ROUND_SECS" -S 384M -i "$T_INI2" "$URL1" \
		>"$T_DIR/bench.$r" 2>&1 &
	bp=$!
	timeout -k 5 30 "${IN_GW[@]}" iscsi-ls -s "iscsi://$GW_ADDR:3260/" \
		>"$T_DIR/ls.$r" 2>&1 || { echo "round $r: discovery failed"; ok=0; }
	LOGINS=$((LOGINS + 2))

	# A path flap while the remote LUN carries I/O: the link stays down until the gateway has
	# seen the path fail (else no fault was injected: a failure), then SOAK_FLAP_SECS more.
	sleep 2
	gw_ip link set "gS$p$SFX" down || { echo "round $r: ip link set gS$p$SFX down failed"; ok=0; }
	if wait_for 30 path_down "$p"; then
		FLAPS=$((FLAPS + 1))
	else
		echo "round $r: path $p never left the active state with its link down: no fault injected"
		ok=0
	fi
	sleep "$SOAK_FLAP_SECS"
	gw_ip link set "gS$p$SFX" up || { echo "round $r: ip link set gS$p$SFX up failed"; ok=0; }
	config_churn "$r" || ok=0
	if [ $((r % SOAK_AGENT_EVERY)) = 0 ] && [ $((t0 - T0)) -lt "$SOAK_AGENT_RESTART_SECS" ]; then
		RESTARTS=$((RESTARTS + 1))
		AG_LAST_RESTART=$r
		agent_restart "$RESTARTS" || { echo "round $r: agent restart $RESTARTS failed"; ok=0; }
	fi
	# The path must be back before the next round cuts the other one.
	wait_for 60 paths_active || { echo "round $r: path $p did not come back"; ok=0; }
	while [ $((SECONDS - t0)) -lt "$SOAK_ROUND_SECS" ] && kill -0 "$l0" "$l1" "$l2" 2>/dev/null; do
		sleep 1
	done
	touch "$T_DIR/round.stop"
	wait "$l0" || ok=0
	wait "$l1" || ok=0
	wait "$l2" || ok=0
	wait "$bp" || { echo "round $r: reads: $(tail -n 2 "$T_DIR/bench.$r" | tr '\n' ' ')"; ok=0; }
	io_counts remote || ok=0
	io_counts file || ok=0
	io_counts churn || ok=0
	bench_counts "$r"
	[ $ok = 1 ]
}

# ---- go -----------------------------------------------------------------------------------

T0=$SECONDS
end=$((SECONDS + SOAK_SECS))
AG_LAST_RESTART=0 AG_WARM=0 AG_PID0= MAX_ROUNDS=0
# measured: a round of each process was measured after its warm-up (its baseline's round).
measured() { [ "$ROUNDS" -gt "${WARM:-0}" ] && [ "$ROUNDS" -gt "$AG_WARM" ] && [ -n "$GW_RSS0" ]; }
while [ $SECONDS -lt $end ] || { ! measured && [ "$ROUNDS" -lt $((MAX_ROUNDS + 3)) ]; }; do
	[ $SECONDS -lt $end ] && MAX_ROUNDS=$((ROUNDS + 1))
	ROUNDS=$((ROUNDS + 1))
	if ! round "$ROUNDS" >"$T_DIR/round.$ROUNDS" 2>&1; then
		BAD=$((BAD + 1))
		fail "round $ROUNDS" "$(head -c 600 "$T_DIR/round.$ROUNDS" | tr '\n' ' ')"
	fi
	if ! t_alive "$GW"; then
		fail "round $ROUNDS" "the gateway died; see $T_DIR/gw.log"
		t_end
	fi
	if [ "$ROUNDS" -le "$SOAK_WARMUP" ] || [ $((SECONDS - T0)) -le "$SOAK_WARMUP_SECS" ] ||
		[ -z "$GW_RSS0" ]; then
		GW_RSS0=$(rss_of "$GW") GW_FD0=$(fds_of "$GW") GW_HEAP0=$(heap_field other) GW_KEPT0=$(heap_kept)
		WARM=$ROUNDS
	fi
	# The agent's baseline: after the gateway's warm-up and a full round after its last restart.
	if [ "$ROUNDS" -le "$WARM" ] || [ "$ROUNDS" -le $((AG_LAST_RESTART + 1)) ] || [ -z "$AG_RSS0" ]; then
		AG_RSS0=$(rss_of "$AGENT_PID") AG_FD0=$(fds_of "$AGENT_PID") AG_PID0=$AGENT_PID
		AG_WARM=$ROUNDS
	fi
	t_log "round $ROUNDS at $((SECONDS - T0)) s: gateway RSS $(rss_of "$GW") kB $(fds_of "$GW") fds, agent $(rss_of "$AGENT_PID") kB $(fds_of "$AGENT_PID") fds; load $(cut -d' ' -f1 /proc/loadavg)"
	t_log "round $ROUNDS memory kB: gateway $(mem_of "$GW"), heap $(heap_of); agent $(mem_of "$AGENT_PID")"
done
ELAPSED=$((SECONDS - T0))
if [ $BAD = 0 ] && [ $MISMATCH = 0 ]; then
	pass "$ROUNDS rounds in ${ELAPSED} s: $WRITES writes and $READS reads verified ($BLOCKS blocks compared), 0 data errors"
else
	fail "data" "$BAD bad rounds, $MISMATCH mismatches in $ROUNDS rounds"
fi
pass "around the I/O: $FLAPS path flaps, $CHANGES REST changes on the other target, $RESTARTS agent restarts, $LOGINS logins and logouts"

# ---- at rest: the counters ------------------------------------------------------------------

# What the PDU pools may keep at rest: per loop, 8 MiB of buffers (ISC_PDU_KEPT_MAX) and 1024
# free PDUs of a few hundred bytes.
PDU_CACHE_MAX="len(s.get('loops') or [0]) * (8 * 1048576 + 1024 * 512)"
at_rest() {
	state && [ "$(sq "(len(s['sessions']), s['connections'], s['tasks'], s['pdus_in_use'],
		s['data_memory']['used'] <= s['tasks_cached'] * 1048576,
		s['pdu_cache']['bytes'] <= $PDU_CACHE_MAX)")" = "(0, 0, 0, 0, True, True)" ] &&
		{ [ $ISER = 0 ] || iser_rest; }
}
# The iSER portal's resources: no connection, QP, MR, data buffer in use or lent, no memory
# registered for a connection.
ISER_REST="[(r['connections'], r['qps'], r['mrs'], r['buffers_in_use'], r['buffers_lent'], r['registered_bytes']) for p in s['portals'] if p['name'] == 'iser0' for r in [p['resources']]]"
iser_rest() {
	[ "$(sq "$ISER_REST")" = "[(0, 0, 0, 0, 0, 0)]" ]
}
if wait_for 30 at_rest; then
	pass "gateway at rest: 0 sessions, 0 connections, 0 tasks, 0 PDUs in use, data memory $(sq "s['data_memory']['used']") B (the cache of $(sq "s['tasks_cached']") tasks), PDU pools $(sq "s['pdu_cache']['bytes']") B (bound $(sq "$PDU_CACHE_MAX"))"
	[ $ISER = 1 ] && pass "iSER portal at rest: 0 connections, QPs, MRs, buffers in use or lent, 0 B registered"
else
	fail "gateway at rest" "$(sq "dict(sessions=len(s['sessions']), connections=s['connections'], tasks=s['tasks'], pdus=s['pdus_in_use'], data=s['data_memory'], cached=s['tasks_cached'], pdu_cache=s['pdu_cache'])") iser (connections, qps, mrs, in use, lent, registered): $(sq "$ISER_REST")"
fi
metrics_rest() {
	[ "$(metric isergw_tasks)" = 0 ] && [ "$(metric isergw_connections)" = 0 ] &&
		[ "$(metric isergw_pdus_in_use)" = 0 ] && [ -n "$(metric isergw_pdu_cache_bytes)" ] &&
		! grep -q '^isergw_sessions{.*} [1-9]' "$T_DIR/metrics.txt"
}
if wait_for 15 metrics_rest; then
	pass "agent /metrics at rest: isergw_tasks, isergw_connections, isergw_pdus_in_use 0, no session; isergw_pdu_cache_bytes $(metric isergw_pdu_cache_bytes)"
else
	fail "/metrics at rest" "$(grep -E '^isergw_(tasks|connections|pdus_in_use|pdu_cache_bytes|sessions)' "$T_DIR/metrics.txt" | tr '\n' ' ')"
fi
if paths_active; then
	pass "the remote LUN ends with both paths active"
else
	fail "remote LUN at the end" "$(sq "[p['state'] for p in s['targets'][0]['luns'][0]['status']['paths']]")"
fi

# bounded NAME BEFORE AFTER FD0 FD1 [KEPT0 KEPT1]: RSS and fds; KEPT0/KEPT1, heap_kept at the
# same two points: what that grew by is memory kept for reuse, not leaked (the heap outside it is
# checked on its own), and is allowed on top of the bound.
bounded() {
	local name=$1 r0=$2 r1=$3 f0=$4 f1=$5 lim kept=0 note=""
	lim=$((r0 * SOAK_RSS_GROWTH_PCT / 100))
	[ "$lim" -lt "$SOAK_RSS_SLACK_KB" ] && lim=$SOAK_RSS_SLACK_KB
	if [ -n "${6:-}" ] && [ -n "${7:-}" ] && [ "$7" -gt "$6" ]; then
		kept=$(($7 - $6)) note=", +$kept kB of it kept for reuse (malloc's free heap, task cache, PDU pools)"
	fi
	if [ -n "$r0" ] && [ -n "$r1" ] && [ $((r1 - r0 - kept)) -le "$lim" ]; then
		pass "$name RSS flat: $r0 kB after warm-up, $r1 kB at the end$note (bound +$lim kB)"
	else
		fail "$name RSS" "${r0:-?} kB after warm-up, ${r1:-?} kB at the end$note (bound +$lim kB)"
	fi
	if [ -n "$f0" ] && [ -n "$f1" ] && [ "$f1" -le $((f0 + SOAK_FD_SLACK)) ]; then
		pass "$name fds flat: $f0 after warm-up, $f1 at the end (bound +$SOAK_FD_SLACK)"
	else
		fail "$name fds" "${f0:-?} after warm-up, ${f1:-?} at the end (bound +$SOAK_FD_SLACK)"
	fi
}
GW_RSS1=$(rss_of "$GW") GW_FD1=$(fds_of "$GW") GW_HEAP1=$(heap_field other) GW_KEPT1=$(heap_kept)
AG_RSS1=$(rss_of "$AGENT_PID") AG_FD1=$(fds_of "$AGENT_PID")
t_log "warm-up: $WARM rounds (the agent: $AG_WARM); the bounds count from the end of those rounds"
check "the gateway's bounds span $((ROUNDS - WARM)) rounds measured after its warm-up ($WARM of $ROUNDS)" \
	test "$ROUNDS" -gt "$WARM"
check "the agent's bounds span $((ROUNDS - AG_WARM)) rounds of one process (pid $AG_PID0 at round $AG_WARM, $AGENT_PID at the end) after its warm-up and its last restart (round $AG_LAST_RESTART)" \
	test "$ROUNDS" -gt "$AG_WARM" -a "$AG_PID0" = "$AGENT_PID"
bounded gateway "$GW_RSS0" "$GW_RSS1" "$GW_FD0" "$GW_FD1" "$GW_KEPT0" "$GW_KEPT1"
bounded agent "$AG_RSS0" "$AG_RSS1" "$AG_FD0" "$AG_FD1"
if [ -z "$GW_HEAP0" ] || [ -z "$GW_HEAP1" ]; then
	t_log "gateway heap: no mallinfo2 figures here (sanitizer build or another C library): not checked"
elif [ $((GW_HEAP1 - GW_HEAP0)) -le "$SOAK_HEAP_SLACK_KB" ]; then
	pass "gateway heap outside data buffers flat: $GW_HEAP0 kB after warm-up, $GW_HEAP1 kB at the end (bound +$SOAK_HEAP_SLACK_KB kB)"
else
	fail "gateway heap" "outside data buffers $GW_HEAP0 kB after warm-up, $GW_HEAP1 kB at the end (bound +$SOAK_HEAP_SLACK_KB kB): a leak"
fi
# Latency: the gateway's slowest histogram bucket per LUN of the soak's target (its upper bound
# in ms; LUN 0 remote, 1 file, 2 RAM) and its commands slower than 1.05 s (the buckets above
# 2^20 us), against what the clients saw and the stall meter.
state
GW_LAT=$(sq "','.join('lun%d:%s' % (l['lun'], (lambda i: '>16777' if i == 22 else '%g' % ((1000 << (i + 3)) / 1e6))(max([i for h in (l['read_latency'], l['write_latency']) for i, c in enumerate(h['counts']) if c] or [0]))) for l in s['targets'][0]['luns'])")
GW_OVER1=$(sq "sum(c for l in s['targets'][0]['luns'] for h in (l['read_latency'], l['write_latency']) for c in h['counts'][18:])")
read -r STALL_MS STALL05 STALL1 <"$T_DIR/stall" 2>/dev/null
LAT="slowest_cmd_ms=remote:${SLOW_MS[remote]},file:${SLOW_MS[file]},churn:${SLOW_MS[churn]}"
LAT="$LAT cmds_over_1s=remote:${SLOW_N[remote]},file:${SLOW_N[file]},churn:${SLOW_N[churn]}"
LAT="$LAT bench_max_lat_ms=$BENCH_LAT_MS bench_max_gap_ms=$BENCH_GAP_MS gw_lat_max_ms=$GW_LAT"
LAT="$LAT gw_cmds_over_1s=${GW_OVER1:-?} stall_max_ms=${STALL_MS:-?} stalls_0.5s=${STALL05:-?} stalls_1s=${STALL1:-?}"
echo "soak-latency: $LAT"
# The client commands of 1 s or more and the stall meter's stalls, with their times (UTC), to be
# read side by side: a stall of the whole machine (or VM guest) shows in both at once.
echo "soak: client commands of 1 s or more: $(wc -l <"$T_DIR/slow.log" 2>/dev/null || echo 0) (the first 40)"
head -n 40 "$T_DIR/slow.log" 2>/dev/null | sed 's/^/soak-slow: /'
echo "soak: stalls of 0.5 s or more: ${STALL05:-?} (the first 40)"
grep '^stall ' "$T_DIR/stall.log" 2>/dev/null | head -n 40 | sed 's/^/soak-stall: /'
echo "soak-figures: transport=$SOAK_TRANSPORT secs=$ELAPSED rounds=$ROUNDS writes=$WRITES reads=$READS blocks=$BLOCKS" \
	"mismatches=$MISMATCH flaps=$FLAPS rest_changes=$CHANGES agent_restarts=$RESTARTS" \
	"logins=$LOGINS warmup_rounds=$WARM agent_warmup_rounds=$AG_WARM gw_rss_kb=$GW_RSS0->$GW_RSS1 gw_fds=$GW_FD0->$GW_FD1" \
	"gw_heap_other_kb=${GW_HEAP0:-?}->${GW_HEAP1:-?} gw_heap_kept_kb=${GW_KEPT0:-?}->${GW_KEPT1:-?}" \
	"agent_rss_kb=$AG_RSS0->$AG_RSS1 agent_fds=$AG_FD0->$AG_FD1 $LAT"
t_end

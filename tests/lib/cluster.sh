# shellcheck shell=bash
# Two gateways and their agents on one etcd, as the cluster suites build them (sourced after
# common.sh, api.sh and etcd.sh). The suite sets ETCD_URL, PREFIX, TTL, AGENT, ALUA, and the
# agents' API_PORT_A/API_PORT_B and tokens TOK_A/TOK_B.

# cluster_gw_conf NAME PORT: $T_DIR/gw-NAME.json, a gateway with one TCP portal and its control
# socket ($T_DIR/ctl-NAME.sock), no targets: its agent brings the cluster's.
cluster_gw_conf() {
	cat >"$T_DIR/gw-$1.json" <<EOC
{ "gateway": { "control_socket": "$T_DIR/ctl-$1.sock" },
  "portals": [ { "name": "tcp0", "transport": "tcp", "address": "$T_HOST", "port": $2 } ],
  "targets": [] }
EOC
}

# cluster_agent_start NAME GROUP API_PORT LOG: member gw-NAME with port group GROUP on the etcd
# store, its API on API_PORT, its state in $T_DIR/agent-NAME; sets AGENT_PID; true once it
# listens.
cluster_agent_start() {
	ASAN_OPTIONS="log_path=$T_DIR/san/asan-agent-$1:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
		UBSAN_OPTIONS="log_path=$T_DIR/san/ubsan-agent-$1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
		t_daemon_start "agent-$1" agent "$4" \
		"$AGENT" --state-dir "$T_DIR/agent-$1" --listen "$T_HOST:$3" \
		--gateway-socket "$T_DIR/ctl-$1.sock" --store etcd --etcd-endpoints "$ETCD_URL" \
		--cluster-prefix "$PREFIX" --gateway-id "gw-$1" --port-group "$2" --lease-ttl "$TTL" \
		--backstore-dirs "$T_SHM"
	AGENT_PID=$T_LAST_PID
	t_wait_port "$AGENT_PID" "$3" 15
}

# cluster_api A|B METHOD PATH [BODY]: a call to agent A or B; sets CODE, the body in
# $T_DIR/body.
cluster_api() {
	local who=$1 m=$2 p=$3 body=${4:-} port tok args=()
	if [ "$who" = A ]; then port=$API_PORT_A; tok=$TOK_A; else port=$API_PORT_B; tok=$TOK_B; fi
	args+=(-H "Authorization: Bearer $tok")
	[ -n "$body" ] && args+=(-H "Content-Type: application/json" --data-binary "$body")
	CODE=$(curl -s -m 10 -o "$T_DIR/body" -w '%{http_code}' -X "$m" "${args[@]}" \
		"http://$T_HOST:$port$p" 2>/dev/null)
}

# members_are A|B LIST: agent A or B lists exactly these members (sorted, comma-separated).
members_are() {
	cluster_api "$1" GET /api/v1/cluster
	[ "$CODE" = 200 ] && [ "$(jget "','.join(sorted(j['members']))")" = "$2" ]
}

# state_is URL GROUP STATE: the LU's ALUA state for GROUP as seen through URL (isergw-alua
# info, kept in $T_DIR/info).
state_is() {
	"$ALUA" info "$1" >"$T_DIR/info" 2>&1 && grep -q "^group $2 $3 " "$T_DIR/info"
}

# cluster_start_pair ETCD_NAME ETCD_LOG: etcd member ETCD_NAME (its log ETCD_LOG), gateways A
# and B on $GW_PORT_A/$GW_PORT_B (cluster_gw_conf files, logs $T_DIR/gw-A.log, gw-B.log),
# then their agents through the suite's own `agent_start NAME GROUP API_PORT` (which sets
# AGENT_PID) with port groups 1 and 2 on $API_PORT_A/$API_PORT_B. Sets GW_A, GW_B, AG_A, AG_B
# and the agents' admin tokens TOK_A, TOK_B. A start that fails is reported with the end of
# its log and ends the suite.
cluster_start_pair() {
	local who grp port
	if ! etcd_start "$1" "$2"; then
		fail start "etcd did not start"
		tail -n 20 "$2"
		t_end
	fi
	for who in A B; do
		port=$GW_PORT_A
		[ "$who" = B ] && port=$GW_PORT_B
		cluster_gw_conf "$who" "$port"
		if ! gw_start "$T_DIR/gw-$who.json" "$T_DIR/gw-$who.log" "$port"; then
			fail start "gateway $who did not start"
			tail -n 20 "$T_DIR/gw-$who.log"
			t_end
		fi
		eval "GW_$who=\$T_GW_PID"
	done
	for who in A B; do
		grp=1 port=$API_PORT_A
		[ "$who" = B ] && grp=2 port=$API_PORT_B
		if ! agent_start "$who" "$grp" "$port"; then
			fail start "agent $who did not start"
			tail -n 20 "$T_DIR"/agent-"$who"*.log
			t_end
		fi
		eval "AG_$who=\$AGENT_PID"
	done
	TOK_A=$(cat "$T_DIR/agent-A/admin.token")
	TOK_B=$(cat "$T_DIR/agent-B/admin.token")
}

# ---- host I/O through a fenced gateway --------------------------------------------------------
# A fence that reached REPORT TARGET PORT GROUPS but not the I/O path would let a host write
# through a gateway that lost its lease (split brain) while every state reads right: these send
# real writes, from a host logged in before the fence (tests/lib/hosts.sh) as a host's session
# would be; a new login could not prove it (libiscsi's login ends with a TEST UNIT READY, which
# a standby port refuses).
# fenced_writes_refused HOST LBA BYTE IMG...: HOST writes one block of BYTE at LBA to LUN 0,
# LUN 1, ... (one per IMG, that LUN's backing file). Each write must end NOT READY, TARGET PORT
# IN STANDBY STATE (02/04/0b: a fenced gateway's local port groups are standby,
# gateway/scsi/scsi_alua.c) and no backing file may change. Prints what it saw (for check).
fenced_writes_refused() {
	local host=$1 lba=$2 byte=$3 i=0 img n rc=0 line=
	shift 3
	for img in "$@"; do
		cp "$img" "$T_SHM/fenced.before.$i" || return 1
		line="$line lun $i fill $lba $byte"
		i=$((i + 1))
	done
	host_do "$host" "$line" || return 1
	cat "$T_DIR/$host.last"
	n=$(grep -c '^fill: check-condition 02/04/0b$' "$T_DIR/$host.last")
	if [ "$n" != $# ]; then
		echo "fenced_writes_refused: $n of $# writes NOT READY 02/04/0b"
		rc=1
	fi
	i=0
	for img in "$@"; do
		if ! cmp "$img" "$T_SHM/fenced.before.$i"; then
			echo "fenced_writes_refused: a write reached LUN $i's backing file $img"
			rc=1
		fi
		i=$((i + 1))
	done
	rm -f "$T_SHM"/fenced.before.*
	return $rc
}

# writes_land HOST LBA BYTE IMG...: the same writes are GOOD and each backing file then holds
# the block (once the fence is lifted: proves fenced_writes_refused looks where a write lands).
writes_land() {
	local host=$1 lba=$2 byte=$3 i=0 img line=
	shift 3
	for img in "$@"; do
		line="$line lun $i fill $lba $byte"
		i=$((i + 1))
	done
	host_do "$host" "$line" || return 1
	cat "$T_DIR/$host.last"
	[ "$(grep -c '^fill: good$' "$T_DIR/$host.last")" = $# ] || return 1
	for img in "$@"; do
		python3 -c 'import sys; f = open(sys.argv[1], "rb"); f.seek(int(sys.argv[2]) * 512)
sys.exit(f.read(512) != bytes([int(sys.argv[3], 0)]) * 512)' "$img" "$lba" "$byte" || {
			echo "writes_land: $img does not hold $byte at LBA $lba"
			return 1
		}
	done
}

# lun_loops SOCKET: the owner loops of the gateway's LUs, sorted and unique ("0 1"), then its
# loop count: "0 1 / 2".
lun_loops() {
	gw_ctl "$1" '{"op":"state"}' >"$T_DIR/state.loops" 2>/dev/null &&
		python3 - "$T_DIR/state.loops" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
out = set()
def walk(o):
    if isinstance(o, dict):
        if "owner_loop" in o:
            out.add(o["owner_loop"])
        for v in o.values():
            walk(v)
    elif isinstance(o, list):
        for v in o:
            walk(v)
walk(s.get("targets", []))
print(" ".join(str(x) for x in sorted(out)), "/", len(s.get("loops") or []))
PY
}

# cu_exit_ok RC ALLOWED_FAILURES: iscsi-test-cu's exit status agrees with its counts: 0 (no
# test failed), or 1 (some failed) where the baseline allows failures. Anything else (255: it
# never ran its tests, 124/137: timed out, over 128: a signal) is a failure whatever it printed.
cu_exit_ok() {
	[ "$1" = 0 ] || { [ "$1" = 1 ] && [ "${2:-0}" -gt 0 ]; }
}

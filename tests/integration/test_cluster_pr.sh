#!/bin/bash
# Persistent reservations across a cluster (docs/CLUSTER.md, "Persistent reservations across
# gateways"): a real etcd on loopback, two gateways and two agents (--store etcd) sharing one
# file LUN. Each agent hands its gateway the LU's reservation state from PREFIX/pr/ and commits
# the gateway's PERSISTENT RESERVE OUTs there with a compare-and-swap, so both gateways decide
# on one state:
#  - a registration and a reservation made through gateway A are read through gateway B
#    (READ KEYS, READ RESERVATION), a write from an unregistered host through B gets
#    RESERVATION CONFLICT, a PREEMPT through B takes the reservation from the host on A;
#  - libiscsi's iscsi-test-cu runs the PERSISTENT RESERVE families (SCSI.Prin*, SCSI.Prout*)
#    with its two URLs on the two gateways (its second initiator's session goes through B) and
#    must pass what one gateway passes (tests/integration/conformance-baseline.txt);
#  - etcd stopped: a PR OUT fails CHECK CONDITION NOT READY 04/0A while READ and WRITE on the
#    same path work; etcd back: PR OUT works again;
#  - the LUN deleted through the REST API takes its PREFIX/pr key with it;
#  - both agents stop cleanly (status 0, no sanitizer report) with nothing in flight left over.
# tests/tools/isergw-pr drives PR IN/OUT and I/O from a fixed I_T nexus (-s fixes the ISID).
#
#   tests/integration/test_cluster_pr.sh        (BUILD=build|build/san)
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/api.sh"
. "$(dirname "$0")/../lib/etcd.sh"
. "$(dirname "$0")/../lib/cluster.sh"

t_begin cluster_pr
if [ "$TARGET" != isergwd ]; then
	skip cluster_pr "the cluster is made of isergwd gateways and agents"
	t_end
fi
AGENT=$T_BUILD/isergw-agent
ALUA=$T_TOOLS/isergw-alua
PR=$T_TOOLS/isergw-pr
if [ ! -x "$AGENT" ] || [ ! -x "$ALUA" ] || [ ! -x "$PR" ]; then
	skip cluster_pr "no $AGENT, $ALUA or $PR (make test-build)"
	t_end
fi
if ! t_need etcd curl python3 iscsi-test-cu; then
	skip cluster_pr "needs etcd (Debian package etcd-server), curl, python3 and iscsi-test-cu"
	t_end
fi

# A lease long enough that a gateway does not fence itself in the seconds the etcd-down checks
# take (the lease is renewed every TTL/3; the fence comes at most TTL - TTL/3 - margin after
# etcd went), short enough that the owner's hold at start (TTL + margin) stays bearable.
TTL=12
IQN=iqn.2026-11.org.isergw:clusterpr
PREFIX=/isergw/test-pr-$$
ETCD_PORT=$(t_free_port)
ETCD_PEER=$(t_free_port)
GW_PORT_A=$(t_free_port)
GW_PORT_B=$(t_free_port)
API_PORT_A=$(t_free_port)
API_PORT_B=$(t_free_port)
ETCD_URL=http://$T_HOST:$ETCD_PORT
LUNIMG=$T_SHM/clusterpr-lun0.img
URL_A=iscsi://$T_HOST:$GW_PORT_A/$IQN/0
URL_B=iscsi://$T_HOST:$GW_PORT_B/$IQN/0
BASELINE_FILE=$T_ROOT/tests/integration/conformance-baseline.txt
# Hosts: one initiator port (name + fixed ISID) per host, the same nexus from run to run.
H1=(-i "$T_INI1" -s 1)
H2=(-i "$T_INI2" -s 2)

# ---- helpers ------------------------------------------------------------------------------

# agent_start NAME GROUP API_PORT: sets AGENT_PID (one log per agent: a restart begins it again).
agent_start() { cluster_agent_start "$1" "$2" "$3" "$T_DIR/agent-$1.log"; }
capi() { cluster_api "$@"; }

# pr HOST... URL COMMAND...: isergw-pr, its lines in $T_DIR/pr.out (and printed for check).
pr() {
	"$PR" "$@" >"$T_DIR/pr.out" 2>&1
	local rc=$?
	cat "$T_DIR/pr.out"
	return $rc
}

# pr_sees HOST_OPTS_NAME URL KEYS_REGEX RESERVATION_REGEX: READ KEYS and READ RESERVATION
# through URL give these lines (the final state: waited for, never a first sign).
pr_sees() {
	local -n who=$1
	pr "${who[@]}" "$2" read-keys read-reservation || return 1
	grep -qE "^keys [0-9]+$3\$" "$T_DIR/pr.out" && grep -qE "^reservation $4\$" "$T_DIR/pr.out"
}

# etcd_key KEY: the value at KEY in $T_DIR/etcd.val; true when the key exists.
etcd_key() {
	local k64
	k64=$(printf '%s' "$1" | base64 -w0)
	curl -s -m 5 -X POST "$ETCD_URL/v3/kv/range" -d "{\"key\":\"$k64\"}" >"$T_DIR/etcd.range" &&
		python3 -c "
import base64, json, sys
j = json.load(open(sys.argv[1]))
kvs = j.get('kvs') or []
if not kvs:
    sys.exit(1)
open(sys.argv[2], 'w').write(base64.b64decode(kvs[0].get('value', '')).decode())
" "$T_DIR/etcd.range" "$T_DIR/etcd.val"
}

# etcd_pr_is KEY PYTHON_TEST: the state at KEY exists and PYTHON_TEST over it (st) holds.
etcd_pr_is() {
	etcd_key "$1" && python3 -c "import json,sys; st=json.load(open(sys.argv[1])); sys.exit(not ($2))" \
		"$T_DIR/etcd.val"
}

etcd_key_gone() {
	curl -s -m 5 -X POST "$ETCD_URL/v3/kv/range" \
		-d "{\"key\":\"$(printf '%s' "$1" | base64 -w0)\"}" >"$T_DIR/etcd.range" &&
		grep -q '"header"' "$T_DIR/etcd.range" && ! grep -q '"kvs"' "$T_DIR/etcd.range"
}

# ---- start: etcd, two gateways, two agents ------------------------------------------------

cluster_start_pair isergw-pr "$T_DIR/etcd.1.log"
check "both agents see both members" wait_for 15 members_are A gw-A,gw-B

truncate -s 64M "$LUNIMG"
capi A POST /api/v1/targets "{\"name\":\"$IQN\",\"allow_any_initiator\":true,\"portals\":[\"tcp0\"]}"
expect "POST target through agent A" 201
capi A POST /api/v1/targets/$IQN/luns "{\"lun\":0,\"owner\":\"gw-A\",\"backstore\":{\"type\":\"file\",\"path\":\"$LUNIMG\",\"size\":\"64M\"}}"
expect "POST LUN 0 (owner gw-A) through agent A" 201
# The owner's group stays non-optimized for TTL + margin after it took the LU (fencing): every
# check below wants both paths serving I/O, A active/optimized and B non-optimized.
check "gateway A serves LUN 0 active/optimized (after its hold)" \
	wait_for $((TTL * 2 + 10)) state_is "$URL_A" 1 ao
check "gateway B serves LUN 0 non-optimized" wait_for 15 state_is "$URL_B" 2 ano
for who in A B; do
	check "agent $who hands its gateway the cluster's reservations" wait_for 10 \
		grep -q "decides persistent reservations on the cluster's state" "$T_DIR/agent-$who.log"
	check "gateway $who takes them (no refusal in agent $who's log)" \
		bash -c "! grep -q 'does not take the cluster.s persistent reservations' '$T_DIR/agent-$who.log'"
done

# ---- one state through both gateways --------------------------------------------------------

K1=0x00000000000000a1
K2=0x00000000000000b2
check "host 1 through A: REGISTER and RESERVE (write exclusive)" \
	pr "${H1[@]}" "$URL_A" register "$K1" reserve "$K1" 1
check "host 2 through B: READ KEYS and READ RESERVATION show host 1's key and reservation" \
	wait_for 10 pr_sees H2 "$URL_B" " $K1" "$K1 1"
check "host 2 through B (not registered): WRITE refused with RESERVATION CONFLICT" \
	t_refused '^write: reservation-conflict$' "$PR" "${H2[@]}" "$URL_B" write 8
check "host 2 through B: READ works (write exclusive lets others read)" \
	pr "${H2[@]}" "$URL_B" read 8
check "host 1 through A: the holder's WRITE works" pr "${H1[@]}" "$URL_A" write 8
check "host 2 through B: REGISTER" pr "${H2[@]}" "$URL_B" register "$K2"
check "host 1 through A: READ KEYS shows both keys" \
	wait_for 10 pr_sees H1 "$URL_A" " ($K1 $K2|$K2 $K1)" "$K1 1"
check "host 2 through B: PREEMPT host 1 (its registration and reservation)" \
	pr "${H2[@]}" "$URL_B" preempt "$K2" "$K1" 1
check "host 1 through A: READ RESERVATION names host 2 now, READ KEYS only its key" \
	wait_for 10 pr_sees H1 "$URL_A" " $K2" "$K2 1"
check "host 1 through A (preempted): WRITE refused with RESERVATION CONFLICT" \
	t_refused '^write: reservation-conflict$' "$PR" "${H1[@]}" "$URL_A" write 8
check "host 2 through B: CLEAR" pr "${H2[@]}" "$URL_B" clear "$K2"
check "through A: no key and no reservation left" wait_for 10 pr_sees H1 "$URL_A" "" none
# SPC-2 reservations would hold on one gateway only: not supported in a cluster, said at once.
check "host 1 through A: RESERVE(6) refused in a cluster (05/20/00, INVALID COMMAND OPERATION CODE)" \
	t_refused '^reserve6: check-condition 05/20/00$' "$PR" "${H1[@]}" "$URL_A" reserve6
check "host 2 through B: WRITE works (nothing was reserved)" pr "${H2[@]}" "$URL_B" write 8
check "gateway A's log says why and what to use" \
	grep -q 'RESERVE(6) refused: in a cluster only SCSI-3 persistent reservations' "$T_DIR/gw-A.log"
PRKEY=$PREFIX/pr/$IQN/0
check "etcd holds the LU's state at $PRKEY (empty after the CLEAR)" etcd_pr_is "$PRKEY" \
	"st['registrations'] == [] and st.get('reservation') is None and st['generation'] > 0"

# ---- iscsi-test-cu's PERSISTENT RESERVE families across the two gateways ----------------------
# iscsi-test-cu asks the other gateway the moment a PR OUT ended (ProutPreempt: PREEMPT through
# B, then TUR and READ KEYS through A): this holds because a PR OUT completes only once every
# other member's gateway applied the change (docs/CLUSTER.md, "Acknowledgements"); without that
# barrier it failed about 1 run in 5 at load 10-17. CLUSTER_PR_CONFORMANCE=0 leaves it out.
if [ "${CLUSTER_PR_CONFORMANCE:-1}" != 1 ]; then
	skip "iscsi-test-cu's PERSISTENT RESERVE families across the gateways" \
		"CLUSTER_PR_CONFORMANCE=${CLUSTER_PR_CONFORMANCE}"
else

LIBISCSI_VERSION=$(dpkg-query -W -f='${Version}' libiscsi-bin 2>/dev/null)
BASE_VERSION=$(sed -n 's/^libiscsi //p' "$BASELINE_FILE")
timeout -k 5 30 iscsi-test-cu --list 2>/dev/null | grep -E '^SCSI\.(Prin|Prout)[^.]*$' \
	>"$T_DIR/families"
if [ "$BASE_VERSION" != "$LIBISCSI_VERSION" ]; then
	fail "conformance baseline" "libiscsi-bin is ${LIBISCSI_VERSION:-unknown}, the baseline's is ${BASE_VERSION:-unknown}"
elif [ ! -s "$T_DIR/families" ]; then
	fail "conformance families" "iscsi-test-cu --list has no SCSI.Prin*/SCSI.Prout* family"
fi
# Passed, failed and skipped tests of one iscsi-test-cu log (CUnit counts a skip as a pass).
cu_counts() {
	awk '
	/^  Test: / { if (cur) tally(); cur = 1; sk = 0; res = "" }
	cur && /\[SKIPPED\]/ { sk = 1 }
	cur && res == "" && /passed/ { res = "p" }
	cur && res == "" && /FAILED/ { res = "f" }
	/^Run Summary/ { if (cur) tally(); cur = 0 }
	function tally() {
		if (res == "f") nf++; else if (res == "p" && sk) ns++; else if (res == "p") np++
		cur = 0
	}
	END { if (cur) tally(); printf "%d %d %d\n", np, nf, ns }' "$1"
}
logins_b0=$(grep -c "$T_INI2 logged in" "$T_DIR/gw-B.log")
while read -r fam; do
	read -r bp bf _ < <(awk -v f="$fam" '$1 == f { print $2, $3, $4 }' "$BASELINE_FILE")
	if [ -z "${bp:-}" ]; then
		fail "$fam" "not in $BASELINE_FILE"
		continue
	fi
	# Whatever a family left behind goes, so the next starts from no registration.
	"$PR" -i "$T_INI1" -s 99 "$URL_A" register 0x99 clear 0x99 >"$T_DIR/$fam.clear" 2>&1
	log=$T_DIR/$fam.log
	timeout -k 5 120 iscsi-test-cu -d -i "$T_INI1" -I "$T_INI2" -t "$fam" "$URL_A" "$URL_B" \
		>"$log" 2>&1
	rc=$?
	read -r np nf ns < <(cu_counts "$log")
	if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		fail "$fam" "iscsi-test-cu timed out (see $log)"
	elif ! grep -q '^Run Summary' "$log"; then
		fail "$fam" "iscsi-test-cu did not run: $(tail -n 3 "$log" | tr '\n' ' ')"
	elif ! cu_exit_ok "$rc" "$bf"; then
		fail "$fam across gateways A and B" "iscsi-test-cu exited with status $rc ($np passed, \
$nf failed, $ns skipped; one gateway fails $bf): $(tail -n 2 "$log" | tr '\n' ' ')"
	elif [ "$np" -lt "$bp" ] || [ "$nf" -gt "$bf" ]; then
		fail "$fam across gateways A and B" "$np passed, $nf failed, $ns skipped; one gateway \
passes $bp, fails $bf: $(grep -B2 -m 3 'FAILED' "$log" | tr '\n' ' ' | cut -c1-300)"
	else
		pass "$fam across gateways A and B: $np passed (one gateway: $bp), $nf failed, $ns skipped"
	fi
done <"$T_DIR/families"
logins_b=$(grep -c "$T_INI2 logged in" "$T_DIR/gw-B.log")
check "iscsi-test-cu's second initiator logged in through gateway B (its multipath URL), \
$((logins_b - ${logins_b0:-0})) times, and never through A" \
	test "$logins_b" -gt "${logins_b0:-0}" -a "$(grep -c "$T_INI2 logged in" "$T_DIR/gw-A.log")" = 0
check "gateways alive after the conformance families" bash -c "kill -0 $GW_A && kill -0 $GW_B"
fi

# ---- etcd away: PR OUT fails NOT READY, I/O goes on ------------------------------------------

"$PR" -i "$T_INI1" -s 99 "$URL_A" register 0x99 clear 0x99 >"$T_DIR/clear.out" 2>&1
check "host 1 through A: REGISTER" pr "${H1[@]}" "$URL_A" register "$K1"
check "B sees host 1's key, no reservation" wait_for 10 pr_sees H2 "$URL_B" " $K1" none
t_stop_pid "$ETCD_PID" 10
# One session right after the stop, well inside the lease (the gateway fences itself only when
# its lease could have run out): the write before and the read after show the path serves I/O,
# so the PR OUT's 04/0A is the commit's, not an ALUA transition.
"$PR" "${H1[@]}" "$URL_A" write 16 reserve "$K1" 1 read 16 >"$T_DIR/down.out" 2>&1
check "etcd down: PR OUT (RESERVE) through A fails CHECK CONDITION NOT READY 04/0A" \
	grep -qx 'reserve: check-condition 02/04/0a' "$T_DIR/down.out"
check "etcd down: WRITE and READ on the same path still work" \
	bash -c "grep -qx 'write: good' '$T_DIR/down.out' && grep -qx 'read: good' '$T_DIR/down.out'"
check "etcd down: PR IN through B answers from the last state (host 1's key, no reservation)" \
	pr_sees H2 "$URL_B" " $K1" none
check "etcd down: agent A logged why the commit failed" \
	grep -q 'PERSISTENT RESERVE OUT on .* not committed: etcd' "$T_DIR/agent-A.log"
if etcd_start isergw-pr "$T_DIR/etcd.2.log"; then
	pass "etcd restarted"
else
	fail "etcd restart" "$(tail -n 5 "$T_DIR/etcd.2.log" | tr '\n' ' ')"
fi
reserve_works() {
	pr "${H1[@]}" "$URL_A" reserve "$K1" 1
}
check "etcd back: PR OUT (RESERVE) through A works again" wait_for 30 reserve_works
check "etcd back: B sees the reservation" wait_for 30 pr_sees H2 "$URL_B" " $K1" "$K1 1"

# ---- the LUN deleted through the REST API takes its reservations along ----------------------

check "the LU's reservation is in etcd before the delete" etcd_pr_is "$PRKEY" \
	"st['reservation']['type'] == 1 and len(st['registrations']) == 1"
capi B DELETE /api/v1/targets/$IQN/luns/0
expect "DELETE LUN 0 through agent B" 204
check "its PREFIX/pr key is gone from etcd" wait_for 15 etcd_key_gone "$PRKEY"

# ---- clean stops ---------------------------------------------------------------------------

for who in A B; do
	eval "pid=\$AG_$who"
	t_stop_pid "$pid" 10
	check "agent $who exits 0 on SIGTERM (status $T_STOP_RC)" \
		test "$T_STOP_RC" = 0 -a "$T_STOP_KILLED" = 0
done
t_end

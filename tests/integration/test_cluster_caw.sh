#!/bin/bash
# COMPARE AND WRITE across the gateways of a cluster (docs/CLUSTER.md, "Atomics"): a real etcd
# on loopback, two gateways and two agents sharing a file LUN whose owner is gw-A.
#   - each LUN's status (REST GET of the LUN) says how it does COMPARE AND WRITE: "owner"
#     through A, "refused" with the reason through B;
#   - a COMPARE AND WRITE through B (not the owner) is refused with NOT READY 04/0B
#     ($T_SENSE_CAW_NOT_OWNER), counted and logged once; through A it is done;
#   - iscsi-test-cu's CompareAndWrite family with URL 1 on the owner and URL 2 on the other
#     gateway passes what one gateway passes (tests/integration/conformance-baseline.txt);
#   - a remote LUN over a back end that has COMPARE AND WRITE (a third isergwd) says "backend"
#     on both gateways, runs it through either, and its MISCOMPARE comes from the back end
#     (the back end never saw a READ, INFORMATION gives the offset);
#   - a remote LUN over tgtd, which has no COMPARE AND WRITE, says so (max 0 from the back
#     end) and is "owner" through A, "refused" through B, like the file LUN.
#
#   tests/integration/test_cluster_caw.sh        (BUILD=build|build/san)
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/api.sh"
. "$(dirname "$0")/../lib/etcd.sh"
. "$(dirname "$0")/../lib/cluster.sh"

t_begin cluster_caw
if [ "$TARGET" != isergwd ]; then
	skip cluster_caw "the cluster is made of isergwd gateways and agents"
	t_end
fi
AGENT=$T_BUILD/isergw-agent
ALUA=$T_TOOLS/isergw-alua
if [ ! -x "$AGENT" ] || [ ! -x "$ALUA" ]; then
	skip cluster_caw "no $AGENT or $ALUA (make test-build)"
	t_end
fi
if ! t_need etcd curl python3 iscsi-test-cu tgtd tgtadm; then
	skip cluster_caw "needs etcd (etcd-server), curl, python3, iscsi-test-cu (libiscsi-bin) and tgt"
	t_end
fi

TTL=3
IQN=iqn.2026-11.org.isergw:caw
IQN_C=iqn.2026-11.org.isergw:caw-backend
PREFIX=/isergw/test-$$
ETCD_PORT=$(t_free_port)
ETCD_PEER=$(t_free_port)
GW_PORT_A=$(t_free_port)
GW_PORT_B=$(t_free_port)
GW_PORT_C=$(t_free_port)
TGT_PORT=$(t_free_port)
API_PORT_A=$(t_free_port)
API_PORT_B=$(t_free_port)
ETCD_URL=http://$T_HOST:$ETCD_PORT
URL_A=iscsi://$T_HOST:$GW_PORT_A/$IQN/0
URL_B=iscsi://$T_HOST:$GW_PORT_B/$IQN/0

# ---- helpers (tests/lib/cluster.sh) -------------------------------------------------------

agent_start() { cluster_agent_start "$1" "$2" "$3" "$T_DIR/agent-$1.$(date +%s%N).log"; }
api() { cluster_api "$@"; }

# atom WHO LUN KEY: status.atomics.compare_and_write.KEY of the LUN through agent WHO.
atom() {
	api "$1" GET "/api/v1/targets/$IQN/luns/$2"
	[ "$CODE" = 200 ] && jget "j['status']['atomics']['compare_and_write']['$3']"
}

# mode_is WHO LUN MODE
mode_is() {
	[ "$(atom "$1" "$2" mode)" = "$3" ]
}

# caw URL LBA CMP WR [DIFF_AT]: isergw-alua caw, its line in $T_DIR/caw.out.
caw() {
	"$ALUA" caw "$@" >"$T_DIR/caw.out" 2>&1
}

# lun_stat SOCKET KEY: the first LUN's counter in a gateway's control socket state.
lun_stat() {
	gw_ctl "$1" '{"op":"state"}' |
		python3 -c "import json,sys; print(json.load(sys.stdin)['targets'][0]['luns'][0]['$2'])"
}

# ---- start: etcd, two gateways, two agents ------------------------------------------------

cluster_start_pair isergw-test "$T_DIR/etcd.log"
check "both agents see both members" wait_for 15 members_are A gw-A,gw-B

# ---- a shared file LUN: only its owner runs COMPARE AND WRITE -------------------------------

truncate -s 1G "$T_SHM/caw-lun0.img"
api A POST /api/v1/targets "{\"name\":\"$IQN\",\"allow_any_initiator\":true,\"portals\":[\"tcp0\"]}"
expect "POST target" 201
api A POST /api/v1/targets/$IQN/luns "{\"lun\":0,\"owner\":\"gw-A\",\"thin\":true,\"backstore\":{\"type\":\"file\",\"path\":\"$T_SHM/caw-lun0.img\",\"size\":\"1G\"}}"
expect "POST LUN 0 (file, owner gw-A)" 201
# The owner reports active/optimized after its hold (TTL + margin); wait for the final state
# on both gateways, not the first sign of it.
check "through A: group 1 ao, group 2 ano" wait_for 30 bash -c \
	"'$ALUA' info '$URL_A' >'$T_DIR/info-A' && grep -qx 'group 1 ao ports 1' '$T_DIR/info-A' && grep -qx 'group 2 ano ports 2' '$T_DIR/info-A'"
check "through B: the same states" wait_for 30 bash -c \
	"'$ALUA' info '$URL_B' >'$T_DIR/info-B' && grep -qx 'group 1 ao ports 1' '$T_DIR/info-B' && grep -qx 'group 2 ano ports 2' '$T_DIR/info-B'"
check "the status through agent A says COMPARE AND WRITE runs there (owner)" \
	wait_for 10 mode_is A 0 owner
check "the status through agent B says it is refused there" wait_for 10 mode_is B 0 refused
check "with the reason: the owner's group" bash -c "[[ \"$(atom B 0 reason)\" == *'group 1'* ]]"

check "COMPARE AND WRITE through B (not the owner) is refused with NOT READY 04/0B" \
	t_refused "$T_SENSE_CAW_NOT_OWNER" "$ALUA" caw "$URL_B" 100 0 0x11
check "through A (the owner) it is done" caw "$URL_A" 100 0 0x11
check "and the block holds its write half: a second one comparing 0x11 succeeds" \
	caw "$URL_A" 100 0x11 0x22
check "through A a wrong compare half is a MISCOMPARE at the byte that differs" bash -c \
	"! '$ALUA' caw '$URL_A' 100 0x22 0x33 7 >'$T_DIR/mc.out'; grep -qx 'caw: CHECK CONDITION sense 0e/1d/00 info 7' '$T_DIR/mc.out'"
# The agent's LUN status comes from its state poll (a second old at most): waited for.
refused_counted() {
	REFUSED_B=$(atom B 0 refused)
	[ "${REFUSED_B:-0}" -ge 1 ]
}
check "B's status counts the refusal" wait_for 10 refused_counted
check "a second COMPARE AND WRITE through B is refused with NOT READY 04/0B too" \
	t_refused "$T_SENSE_CAW_NOT_OWNER" "$ALUA" caw "$URL_B" 100 0x22 0x33
check "gateway B logged the refusal once, naming the owner" \
	bash -c "[ \$(grep -c 'COMPARE AND WRITE refused through this gateway' '$T_DIR/gw-B.log') = 1 ] && grep -q 'owner gw-A' '$T_DIR/gw-B.log'"

# iscsi-test-cu: URL 1 on the owner, URL 2 on the other gateway.
read -r _f WANT_P WANT_F WANT_S < <(grep '^SCSI.CompareAndWrite ' "$T_ROOT/tests/integration/conformance-baseline.txt")
[ -n "${WANT_P:-}" ] ||
	fail "conformance baseline" "tests/integration/conformance-baseline.txt has no SCSI.CompareAndWrite line"
timeout -k 5 180 iscsi-test-cu -d -i "$T_INI1" -I "$T_INI2" -t SCSI.CompareAndWrite \
	"$URL_A" "$URL_B" >"$T_DIR/cu.log" 2>&1
CU_RC=$?
# Each "  Test: NAME ..." is followed, on its line or a later one, by passed or FAILED; a
# [SKIPPED] before a pass is a skip (as test_conformance.sh reads it).
read -r NP NF NS < <(awk '
	function flush() { if (cur) { if (res == "FAILED") nf++; else if (res == "passed") { if (sk) ns++; else np++ } else nf++ } cur = 0 }
	/^Suite: / || /^Run Summary/ { flush(); next }
	/^  Test: / { flush(); cur = 1; res = ""; sk = 0; line = $0; sub(/^[^.]*\.\.\./, "", line); $0 = line }
	cur && res == "" { if ($0 ~ /^passed/) res = "passed"; else if ($0 ~ /^FAILED/) res = "FAILED"; else if (index($0, "[SKIPPED]")) sk = 1 }
	END { flush(); printf "%d %d %d\n", np, nf, ns }' "$T_DIR/cu.log")
t_log "  iscsi-test-cu SCSI.CompareAndWrite across two gateways: exit $CU_RC, $NP passed, $NF failed, $NS skipped (one gateway: $WANT_P $WANT_F $WANT_S)"
# The counts against the baseline, and the tool's own verdict (its exit status) with them.
caw_verdict() {
	[ -n "${WANT_P:-}" ] && [ "$NP" -ge "$WANT_P" ] && [ "$NF" -le "$WANT_F" ] &&
		[ "$NP" -gt 0 ] && cu_exit_ok "$CU_RC" "$WANT_F"
}
check "iscsi-test-cu SCSI.CompareAndWrite, URL 1 on the owner and URL 2 on the other gateway, passes what one gateway passes ($NP of ${WANT_P:-none}, exit $CU_RC)" \
	caw_verdict

# ---- a remote LUN over a back end with COMPARE AND WRITE ---------------------------------

truncate -s 256M "$T_SHM/caw-backend.img"
cat >"$T_DIR/gw-C.json" <<EOC
{ "gateway": { "control_socket": "$T_DIR/ctl-C.sock" },
  "portals": [ { "name": "tcp0", "transport": "tcp", "address": "$T_HOST", "port": $GW_PORT_C } ],
  "targets": [ { "name": "$IQN_C", "portals": ["tcp0"], "allow_any_initiator": true,
    "luns": [ { "lun": 0, "backstore": { "type": "file", "path": "$T_SHM/caw-backend.img",
                                         "size": "256M", "block_size": 512 } } ] } ] }
EOC
gw_start "$T_DIR/gw-C.json" "$T_DIR/gw-C.log" "$GW_PORT_C" || { fail start "back-end gateway C"; t_end; }
GW_C=$T_GW_PID
api A POST /api/v1/targets/$IQN/luns "{\"lun\":1,\"owner\":\"gw-A\",\"backstore\":{\"type\":\"remote\",\"block_size\":512,\"paths\":[{\"url\":\"iscsi://$T_HOST:$GW_PORT_C/$IQN_C/0\"}]}}"
expect "POST LUN 1 (remote, over isergwd C)" 201
check "LUN 1 active/optimized on A (after the owner's hold)" wait_for 30 state_is "iscsi://$T_HOST:$GW_PORT_A/$IQN/1" 1 ao
check "LUN 1: the back end does COMPARE AND WRITE, says agent A (backend)" wait_for 30 mode_is A 1 backend
check "and agent B (backend: atomic for every gateway)" wait_for 30 mode_is B 1 backend
URL1_A=iscsi://$T_HOST:$GW_PORT_A/$IQN/1
URL1_B=iscsi://$T_HOST:$GW_PORT_B/$IQN/1
READS_C=$(lun_stat "$T_DIR/ctl-C.sock" read_ops)
check "remote LUN: COMPARE AND WRITE through A" wait_for 20 caw "$URL1_A" 8 0 0x41
check "remote LUN: through B as well (the back end serialises both)" caw "$URL1_B" 8 0x41 0x42
check "remote LUN: the back end's MISCOMPARE with its offset (INFORMATION 300) through A" bash -c \
	"! '$ALUA' caw '$URL1_A' 8 0x42 0x43 300 >'$T_DIR/mc1.out'; grep -qx 'caw: CHECK CONDITION sense 0e/1d/00 info 300' '$T_DIR/mc1.out'"
READS_C2=$(lun_stat "$T_DIR/ctl-C.sock" read_ops)
check "the compare ran on the back end: C saw no READ from the gateways ($READS_C -> $READS_C2)" \
	test "$READS_C" = "$READS_C2"
backend_counted() {
	BK=$(atom A 1 backend_commands)
	[ "${BK:-0}" -ge 2 ]
}
check "agent A counts them as passed to the back end (backend_commands >= 2)" \
	wait_for 10 backend_counted

# ---- a remote LUN over tgtd, which has no COMPARE AND WRITE -------------------------------

tg_defaults
TG_IQN=iqn.2026-11.org.isergw:caw-tgt
TG_BACKING=$T_SHM/caw-tgt.img
truncate -s 128M "$TG_BACKING"
if tgt_start "$TGT_PORT" "$T_DIR/tgtd.log" && tgt_setup_target; then
	TGT_PID=$T_TGT_PID
	api A POST /api/v1/targets/$IQN/luns "{\"lun\":2,\"owner\":\"gw-A\",\"backstore\":{\"type\":\"remote\",\"block_size\":512,\"paths\":[{\"url\":\"iscsi://$T_HOST:$TGT_PORT/$TG_IQN/1\"}]}}"
	expect "POST LUN 2 (remote, over tgtd)" 201
	lun2_known() {
		api "$1" GET "/api/v1/targets/$IQN/luns/2"
		[ "$CODE" = 200 ] && [ "$(jget "j['status']['state']")" = ready ]
	}
	check "LUN 2 over tgtd is ready through A" wait_for 30 lun2_known A
	check "and through B" wait_for 30 lun2_known B
	check "LUN 2 active/optimized on A (after the owner's hold)" \
		wait_for 30 state_is "iscsi://$T_HOST:$GW_PORT_A/$IQN/2" 1 ao
	# tgtd lists a MAXIMUM COMPARE AND WRITE LENGTH in VPD B0 but refuses the command
	# (05/20/00): each gateway finds it out at its first one, which it then does itself.
	check "over tgtd through B: refused with 04/0B (tgtd's own refusal is not passed on)" \
		t_refused "$T_SENSE_CAW_NOT_OWNER" "$ALUA" caw "iscsi://$T_HOST:$GW_PORT_B/$IQN/2" 0 0 0x11
	check "over tgtd through A: done by the owner" caw "iscsi://$T_HOST:$GW_PORT_A/$IQN/2" 0 0 0x11
	check "and the block holds it" caw "iscsi://$T_HOST:$GW_PORT_A/$IQN/2" 0 0x11 0x12
	check "LUN 2's status through A: owner" wait_for 10 mode_is A 2 owner
	check "and through B: refused" wait_for 10 mode_is B 2 refused
	api A GET "/api/v1/targets/$IQN/luns/2"
	check "its status says the back end has no COMPARE AND WRITE (0 blocks)" \
		test "$(jget "j['status']['backend']['max_compare_and_write_blocks']")" = 0
	check "gateway A logged what tgtd did" grep -q 'refuses the command (05/20/00)' "$T_DIR/gw-A.log"
	api A DELETE "/api/v1/targets/$IQN/luns/2"
	# tgtd with targets ignores SIGTERM: it is this suite's own, stopped by its PID.
	kill -KILL "$TGT_PID" 2>/dev/null
	wait "$TGT_PID" 2>/dev/null
	t_forget "$TGT_PID"
else
	fail tgtd "tgtd did not start: $(tail -n 3 "$T_DIR/tgtd.log" | tr '\n' ' ')"
fi

# ---- stop ---------------------------------------------------------------------------------

t_stop_pid "$AG_A" 10
check "agent A exits 0 on SIGTERM" test "$T_STOP_RC" = 0 -a "$T_STOP_KILLED" = 0
t_stop_pid "$AG_B" 10
check "agent B exits 0 on SIGTERM" test "$T_STOP_RC" = 0 -a "$T_STOP_KILLED" = 0
: "$GW_A" "$GW_B" "$GW_C"
t_end

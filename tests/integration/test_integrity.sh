#!/bin/bash
# Data integrity through the target: isergw-verify writes seeded, position-dependent patterns
# (512 B to 4 MiB, random offsets), reads them back and across earlier writes, over a plain
# login, with header digests, with one-way and mutual CHAP; isergw-digest adds data digests
# (and a corrupted one, which must never reach the disk). A wrong CHAP secret and an
# initiator the target does not list must both be refused at login.
#
#   tests/integration/test_integrity.sh        (TARGET=isergwd|tgtd, BUILD=build|build/san)
set -u
. "$(dirname "$0")/../lib/common.sh"

t_begin integrity
VERIFY=$T_TOOLS/isergw-verify
COUNT=${VERIFY_COUNT:-150}
if [ ! -x "$VERIFY" ]; then
	fail build "$VERIFY is missing (make $BUILD/tests/tools/isergw-verify)"
	t_end
fi

# Initiator and target secrets of 12+ bytes (the gateway's lower bound, RFC 7143 advice).
INI_USER=host1
INI_SECRET=0123456789ab
TGT_USER=gw
TGT_SECRET=ba9876543210
ADMITTED=iqn.1994-05.com.example:host1

verify() {
	timeout -k 5 300 "$VERIFY" -q -i "$ADMITTED" "$@"
}

# Target 1: no CHAP, admits only $ADMITTED.
tg_defaults
TG_INITIATORS=$ADMITTED
if ! target_start plain; then
	fail start "$TARGET did not start"
	t_end
fi
check "plain: 512 B..4 MiB random writes verified" verify -s 1 -n "$COUNT" "$T_URL"
check "header digest CRC32C: writes verified" verify -d -s 2 -n "$COUNT" "$T_URL"
# libiscsi accepts whatever the target answers: make sure the digest was really in use.
if [ "$TARGET" = isergwd ]; then
	if grep -q "logged in to $TG_IQN .*header digest" "$T_DIR/plain.isergwd.log"; then
		pass "header digest negotiated (gateway log)"
	else
		fail "header digest negotiated (gateway log)" \
			"no 'logged in ... header digest' line in $T_DIR/plain.isergwd.log"
	fi
fi
# libiscsi 1.19 cannot offer DataDigest: isergw-digest, a raw initiator, checks both digests.
DIGEST=$T_TOOLS/isergw-digest
if [ -x "$DIGEST" ]; then
	check "header+data digest CRC32C: writes verified, target digests correct" \
		timeout -k 5 60 "$DIGEST" -i "$ADMITTED" "$T_URL"
	check "a WRITE with a bad data digest is refused and not written" \
		timeout -k 5 60 "$DIGEST" -i "$ADMITTED" -B "$T_URL"
else
	fail "data digest" "$DIGEST is missing"
fi
check "small I/O only (512 B..8 KiB), seed 3" verify -s 3 -n "$COUNT" -m 8k -N "$T_URL"
check "large I/O only (1..4 MiB), seed 4" verify -s 4 -n 40 -M 1M -N "$T_URL"

# An initiator the target does not list must not log in: exit 3 (login failed) with the
# target's login status, Authorization failure (0x0202; tgt answers Target not found, 0x0203,
# hiding the target). A dead target or a dropped connection also gives exit 3, so the status in
# the tool's message is what proves the refusal.
want=$T_LOGIN_AUTHZ
[ "$TARGET" = tgtd ] && want=$T_LOGIN_NOTFOUND
timeout -k 5 60 "$VERIFY" -q -i iqn.1994-05.com.example:stranger -n 1 "$T_URL" \
	>"$T_DIR/stranger.out" 2>&1
rc=$?
if [ $rc -eq 3 ] && grep -qE "$want" "$T_DIR/stranger.out"; then
	pass "unlisted initiator refused at login"
else
	fail "unlisted initiator refused at login" "exit $rc: $(tail -n 2 "$T_DIR/stranger.out")"
fi

# Persistence: what one session wrote, a fresh target process must still return.
timeout -k 5 300 "$VERIFY" -i "$ADMITTED" -s 8 -n 60 -N "$T_URL" >"$T_DIR/persist.out" 2>&1
rc=$?
first=$(sed -n 's/^verify: first write at LBA \([0-9]*\) .*/\1/p' "$T_DIR/persist.out")
target_stop
if [ $rc -ne 0 ] || [ -z "$first" ]; then
	fail "data survives a target restart" "first run: exit $rc: $(tail -n 2 "$T_DIR/persist.out")"
elif ! target_start plain-restart; then
	fail "data survives a target restart" "$TARGET did not start again"
else
	check "data survives a target restart" verify -V -s 8 -n 60 "$T_URL"
	target_stop
	# The checker itself: a block changed behind the target's back must be reported.
	printf 'CORRUPTED-BLOCK!' | dd of="$TG_BACKING" bs=1 seek=$((first * 512 + 100)) \
		conv=notrunc status=none
	if target_start plain-corrupt; then
		timeout -k 5 300 "$VERIFY" -q -i "$ADMITTED" -V -s 8 -n 60 "$T_URL" \
			>"$T_DIR/corrupt.out" 2>&1
		rc=$?
		if [ $rc -eq 1 ] && grep -q "MISMATCH.*LBA $first " "$T_DIR/corrupt.out"; then
			pass "a block corrupted in the backing file is reported"
		else
			fail "a block corrupted in the backing file is reported" \
				"exit $rc: $(tail -n 2 "$T_DIR/corrupt.out")"
		fi
		target_stop
	else
		fail "a block corrupted in the backing file is reported" "$TARGET did not start"
	fi
fi

# Target 2: one-way CHAP.
tg_defaults
TG_INITIATORS=$ADMITTED
TG_CHAP_USER=$INI_USER
TG_CHAP_SECRET=$INI_SECRET
if target_start chap; then
	check "one-way CHAP: writes verified" \
		verify -u "$INI_USER" -p "$INI_SECRET" -s 5 -n "$COUNT" "$T_URL"
	timeout -k 5 60 "$VERIFY" -q -i "$ADMITTED" -u "$INI_USER" -p wrongsecret99 -n 1 "$T_URL" \
		>"$T_DIR/wrong.out" 2>&1
	rc=$?
	if [ $rc -eq 3 ] && grep -qE "$T_LOGIN_AUTH" "$T_DIR/wrong.out"; then
		pass "wrong CHAP secret refused at login"
	else
		fail "wrong CHAP secret refused at login" "exit $rc: $(tail -n 2 "$T_DIR/wrong.out")"
	fi
	timeout -k 5 60 "$VERIFY" -q -i "$ADMITTED" -n 1 "$T_URL" >"$T_DIR/nochap.out" 2>&1
	rc=$?
	if [ $rc -eq 3 ] && grep -qE "$T_LOGIN_AUTH" "$T_DIR/nochap.out"; then
		pass "login without CHAP refused when CHAP is required"
	else
		fail "login without CHAP refused when CHAP is required" \
			"exit $rc: $(tail -n 2 "$T_DIR/nochap.out")"
	fi
	target_stop
else
	fail "one-way CHAP" "$TARGET did not start"
fi

# Target 3: mutual CHAP.
tg_defaults
TG_INITIATORS=$ADMITTED
TG_CHAP_USER=$INI_USER
TG_CHAP_SECRET=$INI_SECRET
TG_MUTUAL_USER=$TGT_USER
TG_MUTUAL_SECRET=$TGT_SECRET
if target_start mutual; then
	check "mutual CHAP + header digest: writes verified" \
		verify -d -u "$INI_USER" -p "$INI_SECRET" -U "$TGT_USER" -P "$TGT_SECRET" -s 6 \
		-n "$COUNT" "$T_URL"
	# The initiator must refuse a target that proves the wrong secret.
	timeout -k 5 60 "$VERIFY" -q -i "$ADMITTED" -u "$INI_USER" -p "$INI_SECRET" -U "$TGT_USER" \
		-P notthesecret1 -n 1 "$T_URL" >"$T_DIR/mutual-wrong.out" 2>&1
	rc=$?
	if [ $rc -eq 3 ] && grep -qE "$T_LOGIN_MUTUAL" "$T_DIR/mutual-wrong.out"; then
		pass "mutual CHAP: target with the wrong secret refused"
	else
		fail "mutual CHAP: target with the wrong secret refused" \
			"exit $rc: $(tail -n 2 "$T_DIR/mutual-wrong.out")"
	fi
	target_stop
else
	fail "mutual CHAP" "$TARGET did not start"
fi

# Target 4 (gateway only): more large writes in flight than gateway.data_memory holds. The
# commands beyond it are answered TASK SET FULL, which initiators retry; nothing fails, the
# connection stays, and the gateway's state counts them.
if [ "$TARGET" = isergwd ]; then
	tg_defaults
	SOCK=$T_DIR/limit.sock
	TG_GATEWAY="\"data_memory\": \"64M\", \"control_socket\": \"$SOCK\""
	if target_start limit; then
		timeout -k 5 60 "$T_TOOLS/isergw-bench" -i "$ADMITTED" -w -b 4M -q 32 -t 3 "$T_URL" \
			>"$T_DIR/limit.out" 2>&1
		rc=$?
		busy=$(sed -n 's/^bench: .* errors=0 busy=\([0-9]*\)$/\1/p' "$T_DIR/limit.out")
		if [ $rc -eq 0 ] && [ "${busy:-0}" -gt 0 ]; then
			pass "128 MiB of writes in flight, 64 MiB data memory: $busy TASK SET FULL, retried, no error"
		else
			fail "data memory limit answers TASK SET FULL" \
				"exit $rc, busy=${busy:-?}: $(tail -n 2 "$T_DIR/limit.out")"
		fi
		echo '{"op":"state"}' | timeout 5 python3 -c '
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(sys.stdin.buffer.read()); f = s.makefile()
m = json.loads(f.readline())["data_memory"]
print(m["used"], m["limit"], m["task_set_full"])' "$SOCK" >"$T_DIR/limit.state" 2>&1
		read -r used limit tsf <"$T_DIR/limit.state"
		if [ "${limit:-0}" = $((64 << 20)) ] && [ "${tsf:-0}" -gt 0 ] &&
			[ "${used:-x}" -le "${limit:-0}" ] 2>/dev/null; then
			pass "state: data memory $used of $limit bytes, $tsf TASK SET FULL"
		else
			fail "state reports the data memory" "$(cat "$T_DIR/limit.state")"
		fi
		check "after the flood: writes verified" verify -s 9 -n 40 "$T_URL"
		target_stop
	else
		fail "data memory limit" "$TARGET did not start"
	fi
fi

t_end

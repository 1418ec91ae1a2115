#!/bin/bash
# test_mp_ini: the remote backstore's native initiator (gateway/mpath/mp_ini.c) against real
# targets on loopback: tgtd and isergwd, without and with CHAP (one-way and mutual), header
# and data digests (CRC32C) with one-way CHAP. Each runs tests/unit/mpath/test_mp_ini.c: login, READ CAPACITY, NOP ping,
# writes read back and compared at sizes from 512 bytes to 3 MiB (immediate data, unsolicited
# Data-Out, R2Ts), 4 KiB reads at queue depth 32 under a bound of system calls per command,
# 512 KiB reads at queue depth 8 landing (90% or more) in place, verified, and
# a wrong CHAP secret refused. Then login redirection (RFC 7143 §11.13.5) by tgtd: a target at
# 127.0.0.1 that sends every login to a second tgtd at 127.0.0.2, where the same tests run
# (the data is written and read back through the redirected connection), and a target that
# redirects every login forever, refused as a redirect loop.
. "$(dirname "$0")/../lib/common.sh"

t_begin mp_ini

BIN=$T_BUILD/tests/unit/mpath/test_mp_ini
trap 't_stop_all; t_exit_trap' EXIT
if [ ! -x "$BIN" ]; then
	skip mp_ini "no $BIN (make test-build)"
	t_end
fi

# mp_ini_run WHAT: the native initiator's tests against the target described by the TG_*
# variables, but those named in NOT_HERE (tests that need a target this configuration does not
# have: CHAP, a redirecting one), which Criterion's --filter leaves out. Every other test must
# pass: one that skips is counted as a skip with its reason (inside `make test` a failure unless
# tests/allowed-skips.txt allows it), named after the configuration so that the unit run's
# allowance of the same skips does not cover it.
mp_ini_run() {
	local what=$1 out filter='mp_ini/*' t reason
	[ -n "${NOT_HERE:-}" ] && filter="mp_ini/!($(printf '%s' "$NOT_HERE" | tr ' ' '|'))"
	out=$(MP_INI_PORTAL=$T_PORTAL MP_INI_TARGET=$TG_IQN MP_INI_LUN=$T_LUN \
		MP_INI_CHAP_USER=$TG_CHAP_USER MP_INI_CHAP_SECRET=$TG_CHAP_SECRET \
		MP_INI_MUTUAL_USER=$TG_MUTUAL_USER MP_INI_MUTUAL_SECRET=$TG_MUTUAL_SECRET \
		MP_INI_HDIGEST=${HD:-} MP_INI_DDIGEST=${DD:-} MP_INI_REDIRECTS=${REDIRECTS:-} \
		MP_INI_LOOP_PORTAL=${LOOP_PORTAL:-} MP_INI_LOOP_TARGET=${LOOP_IQN:-} \
		"$BIN" --jobs 1 --verbose --filter "$filter" 2>&1)
	local rc=$?
	printf '%s\n' "$out" >"$T_DIR/mp_ini.$what.log"
	for t in ${MUST_PASS:-}; do	# the tests this configuration is for must have run
		printf '%s' "$out" | grep -q "PASS.*mp_ini::$t\b" || rc=1
	done
	while IFS= read -r t; do
		reason=${t#*: }
		t=${t%%: *}
		# Left out by the filter above: not run here, by this configuration's design.
		[ "$reason" = "Test is disabled" ] && [[ " ${NOT_HERE:-} " == *" ${t#mp_ini::} "* ]] &&
			continue
		skip "$what: $t" "$reason"
	done < <(printf '%s\n' "$out" | sed -n 's/^\[SKIP\] //p')
	if [ $rc -eq 0 ] && ! printf '%s' "$out" | grep -q 'Failing: [1-9]\|Crashing: [1-9]'; then
		pass "$what: $(printf '%s\n' "$out" | grep -o "system calls per 4 KiB read.*" | head -1); $(printf "%s\n" "$out" | grep -o "512 KiB reads at QD.*" | head -1)"
	else
		fail "$what"
		printf '%s\n' "$out" | grep -v '^\[RUN \]\|^\[PASS\]' | tail -n 20
	fi
}

for TARGET in tgtd isergwd; do
	if [ "$TARGET" = tgtd ] && ! t_need tgtd tgtadm; then
		skip mp_ini "tgtd: not installed"
		continue
	fi
	for auth in none chap mutual; do
		tg_defaults
		TG_SIZE=64M
		TG_IQN=iqn.2026-11.org.isergw:mp-ini
		TG_BACKING=$T_SHM/mp_ini.$TARGET.img
		HD= DD=
		NOT_HERE="redirected_login redirect_loop_refused_tgtd"
		[ "$auth" = none ] && NOT_HERE="$NOT_HERE chap_wrong_secret_refused"
		case $auth in
		chap)
			TG_CHAP_USER=mpini TG_CHAP_SECRET=mp-ini-secret-12
			HD=1 DD=1
			;;
		mutual)
			TG_CHAP_USER=mpini TG_CHAP_SECRET=mp-ini-secret-12
			TG_MUTUAL_USER=mpinitgt TG_MUTUAL_SECRET=mp-ini-mutual-34
			;;
		esac
		if ! target_start "$TARGET.$auth"; then
			fail "$TARGET ($auth): target did not start"
			continue
		fi
		mp_ini_run "$TARGET, auth $auth${HD:+, header digest}${DD:+, data digest}"
		target_stop
		rm -f "$TG_BACKING"
	done
done

# tgtd redirects a login unless the initiator's own address is the one it redirects to: the
# initiator connects from 127.0.0.1, so 127.0.0.2 is "elsewhere" (and still loopback).
mp_ini_redirect() {
	local to_pid from_pid to_port
	TARGET=tgtd
	tg_defaults
	TG_SIZE=64M
	TG_IQN=iqn.2026-11.org.isergw:mp-ini
	TG_BACKING=$T_SHM/mp_ini.redirect.img
	if ! T_HOST=127.0.0.2 target_start tgtd.redirect-to; then
		fail "redirect: the target at 127.0.0.2 did not start"
		return
	fi
	to_pid=$T_TARGET_PID to_port=$T_PORT
	TG_BACKING=$T_SHM/mp_ini.redirect-from.img
	if ! target_start tgtd.redirect-from; then
		fail "redirect: the redirecting target did not start"
		tgt_stop "$to_pid"
		return
	fi
	from_pid=$T_TARGET_PID
	if ! { tgtadm_c --op update --mode target --tid 1 -n RedirectAddress -v 127.0.0.2 &&
		tgtadm_c --op update --mode target --tid 1 -n RedirectPort -v "$to_port" &&
		tgtadm_c --op update --mode target --tid 1 -n RedirectReason -v Temporary &&
		tgtadm_c --op new --mode target --tid 2 -T "$TG_IQN-loop" &&
		tgtadm_c --op bind --mode target --tid 2 -I ALL &&
		tgtadm_c --op new --mode portal --param "portal=127.0.0.2:$T_PORT" &&
		tgtadm_c --op update --mode target --tid 2 -n RedirectAddress -v 127.0.0.2 &&
		tgtadm_c --op update --mode target --tid 2 -n RedirectPort -v "$T_PORT" &&
		tgtadm_c --op update --mode target --tid 2 -n RedirectReason -v Permanent; } \
		>"$T_DIR/redirect.tgtadm.log" 2>&1; then
		fail "redirect: tgtadm refused the redirect settings" "$(tail -n 3 "$T_DIR/redirect.tgtadm.log")"
	else
		MUST_PASS="redirected_login redirect_loop_refused_tgtd write_read_verify" \
			NOT_HERE=chap_wrong_secret_refused REDIRECTS=1 LOOP_PORTAL=$T_PORTAL LOOP_IQN=$TG_IQN-loop \
			mp_ini_run "tgtd, login redirected from $T_PORTAL to 127.0.0.2:$to_port; a redirect loop refused"
	fi
	tgt_stop "$from_pid"
	tgt_stop "$to_pid"
	T_TARGET_PID=
	rm -f "$T_SHM/mp_ini.redirect.img" "$T_SHM/mp_ini.redirect-from.img"
}

if t_need tgtd tgtadm; then
	mp_ini_redirect
else
	skip mp_ini "tgtd: not installed"
fi
t_end

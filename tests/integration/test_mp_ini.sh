#!/bin/bash
# test_mp_ini: the remote backstore's native initiator (gateway/mpath/mp_ini.c) against real
# targets on loopback: tgtd and isergwd, without and with CHAP (one-way and mutual), header
# and data digests (CRC32C) with one-way CHAP. Each runs tests/unit/mpath/test_mp_ini.c: login, READ CAPACITY, NOP ping,
# writes read back and compared at sizes from 512 bytes to 3 MiB (immediate data, unsolicited
# Data-Out, R2Ts), 4 KiB reads at queue depth 32 under a bound of system calls per command,
# 512 KiB reads at queue depth 8 landing (90% or more) in place, verified, and
# a wrong CHAP secret refused.
. "$(dirname "$0")/../lib/common.sh"

t_begin mp_ini

BIN=$T_BUILD/tests/unit/mpath/test_mp_ini
trap 't_stop_all; t_exit_trap' EXIT
if [ ! -x "$BIN" ]; then
	skip mp_ini "no $BIN (make test-build)"
	t_end
fi

mp_ini_run() {
	local what=$1 out
	out=$(MP_INI_PORTAL=$T_PORTAL MP_INI_TARGET=$TG_IQN MP_INI_LUN=$T_LUN \
		MP_INI_CHAP_USER=$TG_CHAP_USER MP_INI_CHAP_SECRET=$TG_CHAP_SECRET \
		MP_INI_MUTUAL_USER=$TG_MUTUAL_USER MP_INI_MUTUAL_SECRET=$TG_MUTUAL_SECRET \
		MP_INI_HDIGEST=${HD:-} MP_INI_DDIGEST=${DD:-} "$BIN" --jobs 1 --verbose 2>&1)
	local rc=$?
	printf '%s\n' "$out" >"$T_DIR/mp_ini.$what.log"
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
t_end

# tests/lib/wait.sh: sourced (bash 5) by tests/lib/common.sh and by the VM guest's lib.sh (which
# cannot source common.sh: its pass/fail/check are the guest's own), so both wait one way.

# t_wait_for SECONDS CMD...: runs CMD every 0.2 s until it succeeds (true) or SECONDS (may be
# fractional: 0.5, 2.5) have passed on the wall clock (false). The last try ends after the
# deadline, so a slow machine still looks at the final state. CMD's output is left as it is.
#   check "the session is gone" t_wait_for 10 st_is "len(sess('$T_INI2')) == 0"
t_wait_for() {
	local secs=$1 whole frac end
	shift
	whole=${secs%%.*}
	frac=
	[[ $secs == *.* ]] && frac=${secs#*.}
	frac=${frac}000000
	end=$((${EPOCHREALTIME//[!0-9]/} + 10#${whole:-0} * 1000000 + 10#${frac:0:6}))
	while :; do
		"$@" && return 0
		[ "${EPOCHREALTIME//[!0-9]/}" -ge "$end" ] && return 1
		sleep 0.2
	done
}

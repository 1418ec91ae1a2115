#!/bin/bash
# test_soak: the 3-minute soak of `make test` (tests/soak/run.sh with SOAK_SECS=180: mixed
# verified I/O through the gateway while back-end paths flap, the configuration changes through
# the agent, sessions come and go and the agent restarts; then the counters and the bounds).
# Under the sanitized rerun (BUILD=build/san) it runs 60 s: what ASan and LeakSanitizer add is
# the exit of a gateway and an agent that went through flaps, live applies and restarts, which
# a minute gives, and the sanitized pass's budget (docs/TESTING.md) has no room for three.
# SOAK_SECS set by the caller wins.
case "${BUILD:-build}" in
*/san | san)
	# Three rounds fit: the agent restarts in the first, so the sanitized pass has a restart
	# too, and the same agent process runs the two after it (its bounds compare one process).
	SOAK_SECS=${SOAK_SECS:-60}
	SOAK_AGENT_EVERY=${SOAK_AGENT_EVERY:-1}
	SOAK_AGENT_RESTART_SECS=${SOAK_AGENT_RESTART_SECS:-1}
	export SOAK_AGENT_EVERY SOAK_AGENT_RESTART_SECS
	;;
*) SOAK_SECS=${SOAK_SECS:-180} ;;
esac
SOAK_ROUND_SECS=${SOAK_ROUND_SECS:-25}
export SOAK_SECS SOAK_ROUND_SECS
exec bash "$(dirname "$0")/../soak/run.sh"

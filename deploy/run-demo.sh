#!/bin/bash
# `make run`: starts the gateway (and the agent, once built) in the foreground on the embedded
# demo configuration kept in ./state, prints what runs where, and stops everything on Ctrl-C.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
STATE=${ISERGW_STATE:-$PWD/state}
mkdir -p "$STATE"

gw_pid=
agent_pid=
stop() {
	trap - INT TERM EXIT
	[ -n "$agent_pid" ] && kill -TERM "$agent_pid" 2>/dev/null
	[ -n "$gw_pid" ] && kill -TERM "$gw_pid" 2>/dev/null
	[ -n "$agent_pid" ] && wait "$agent_pid" 2>/dev/null
	[ -n "$gw_pid" ] && wait "$gw_pid" 2>/dev/null
	echo "isergw: stopped"
}
trap 'stop; exit 0' INT TERM
trap stop EXIT

SOCK=$STATE/isergwd.sock
"$BUILD/isergwd" --state-dir "$STATE" --control-socket "$SOCK" &
gw_pid=$!

# Ready when the portal accepts connections (bounded: a gateway never hangs its start-up).
i=0
while ! (exec 3<>/dev/tcp/127.0.0.1/3260) 2>/dev/null; do
	if ! kill -0 "$gw_pid" 2>/dev/null; then
		wait "$gw_pid"
		rc=$?
		gw_pid=
		echo "isergw: the gateway exited with status $rc (see above)" >&2
		exit 1
	fi
	i=$((i + 1))
	if [ $i -gt 100 ]; then
		echo "isergw: the gateway did not open 127.0.0.1:3260 within 10 s" >&2
		exit 1
	fi
	sleep 0.1
done

if [ -x "$BUILD/isergw-agent" ]; then
	# The agent keeps its desired configuration and tokens in its own folder; on its first
	# start it adopts the gateway's running configuration.
	# A read-only token for the dashboard, made once (before the agent holds the token list).
	if [ ! -s "$STATE/agent/dashboard.token" ]; then
		mkdir -p -m 0700 "$STATE/agent"
		(umask 077 && "$BUILD/isergw-agent" --state-dir "$STATE/agent" \
			--add-token dashboard --role read >"$STATE/agent/dashboard.token") ||
			rm -f "$STATE/agent/dashboard.token"
	fi
	"$BUILD/isergw-agent" --state-dir "$STATE/agent" --listen 127.0.0.1:8080 \
		--gateway-socket "$SOCK" --webui-dir "$PWD/webui" &
	agent_pid=$!
fi

cat <<MSG

isergw demo is running (Ctrl-C stops it):
  gateway      pid $gw_pid, iSCSI/TCP portal 127.0.0.1:3260
  target       iqn.2026-11.org.isergw:demo, LUN 0: sparse file $STATE/demo.img (1 GiB)
  config       $STATE/isergwd.json
MSG
if [ -n "$agent_pid" ]; then
	echo "  agent        pid $agent_pid, REST API at http://127.0.0.1:8080/api/v1/ (docs/REST.md)"
	echo "  dashboard    http://127.0.0.1:8080/"
	[ -s "$STATE/agent/dashboard.token" ] &&
		echo "               sign in with the read-only token in $STATE/agent/dashboard.token"
	echo "  admin token  $STATE/agent/admin.token (first start; keep it, or add more with"
	echo "               isergw-agent --state-dir $STATE/agent --add-token NAME)"
else
	echo "  agent        not built yet (REST agent and dashboard come with a later release)"
fi
# Each "Try it" line is a command that works as printed, from this folder, with what
# `make run` installed (tests/integration/test_run.sh runs every one of them).
cat <<MSG

Try it:
  iscsi-ls -s iscsi://127.0.0.1/
  iscsi-inq iscsi://127.0.0.1/iqn.2026-11.org.isergw:demo/0
MSG
if [ -n "$agent_pid" ]; then
	cat <<MSG
  curl -s http://127.0.0.1:8080/api/v1/health
  $BUILD/isergwctl --state-dir $STATE/agent target list
MSG
fi
cat <<MSG

Linux's own initiator (open-iscsi: iscsiadm) belongs on another host: give the portal an
address that host reaches (docs/CONFIGURATION.md, "portals[]").
MSG
echo
wait "$gw_pid"
rc=$?
gw_pid=
exit $rc

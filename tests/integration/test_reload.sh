#!/bin/bash
# SIGHUP, what `systemctl reload` sends (the install suite does it through systemd): the gateway
# re-reads its file and applies the difference in the same process, with and without a control
# socket; a LUN that did not change keeps answering, a new portal listens, a LUN added to the
# file appears, a removed portal closes, and a file with a mistake changes nothing and names the
# mistake. The agent re-reads its token list: a token added on disk works after SIGHUP.
#
#   tests/integration/test_reload.sh
set -u
. "$(dirname "$0")/../lib/common.sh"

t_begin reload
cd "$T_ROOT" || exit 1
if [ "$TARGET" != isergwd ]; then
	skip reload "the gateway's own signal handling (TARGET=$TARGET)"
	t_end
fi
if ! t_need iscsi-inq iscsi-readcapacity16 curl python3; then
	skip reload "needs libiscsi-bin, curl and python3"
	t_end
fi
tg_defaults
TG_BS=ram
TG_SIZE=8M
P1=$(t_free_port)
P2=$(t_free_port)
CONF=$T_DIR/isergwd.json
gw_write_config "$CONF" "$P1"

# edit PYTHON: changes the config file in place (c is the parsed JSON).
edit() {
	python3 - "$CONF" "$1" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
exec(sys.argv[2])
json.dump(c, open(sys.argv[1], "w"), indent=2)
EOF
}
log_has() {
	t_wait_for 3 grep -q "$1" "$T_DIR/gw.log"
}

for mode in socket file; do
	args=()
	[ "$mode" = socket ] && args=(--control-socket "$T_DIR/ctl.sock")
	gw_write_config "$CONF" "$P1"
	: >"$T_DIR/gw.log"
	t_daemon_start isergwd isergwd "$T_DIR/gw.log" "$T_BUILD/isergwd" --config "$CONF" "${args[@]}"
	GP=$T_LAST_PID
	if ! t_wait_port "$GP" "$P1" 15; then
		fail "start ($mode)" "$(tail -n 5 "$T_DIR/gw.log" | tr '\n' ' ')"
		t_stop_pid "$GP" 5
		continue
	fi
	what="with a control socket"
	[ "$mode" = file ] && what="without a control socket"

	edit "c['portals'].append({'name': 'tcp1', 'transport': 'tcp', 'address': '$T_HOST', 'port': $P2});
c['targets'][0]['portals'].append('tcp1');
c['targets'][0]['luns'].append({'lun': 1, 'product': 'reloaded', 'backstore': {'type': 'ram', 'size': '4M'}})"
	kill -HUP "$GP"
	if log_has "applied" && t_wait_port "$GP" "$P2" 5 &&
		iscsi-inq "iscsi://$T_HOST:$P2/$TG_IQN/1" 2>&1 | grep -q "Product:reloaded" &&
		iscsi-inq "iscsi://$T_HOST:$P1/$TG_IQN/0" >/dev/null 2>&1; then
		pass "SIGHUP $what: a new portal and a new LUN, the old LUN still answers, same process"
	else
		fail "SIGHUP $what" "$(tail -n 4 "$T_DIR/gw.log" | tr '\n' ' ')"
	fi

	cp "$CONF" "$T_DIR/good.json"
	edit "c['portals'][1]['port'] = 99999"
	: >"$T_DIR/gw.log.mark"
	kill -HUP "$GP"
	if log_has "not applied.*99999 is out of range" && t_port_open "$T_HOST" "$P2" && t_alive "$GP"; then
		pass "SIGHUP $what, file with a mistake: nothing changes, the log names it"
	else
		fail "SIGHUP bad file ($mode)" "$(tail -n 3 "$T_DIR/gw.log" | tr '\n' ' ')"
	fi
	cp "$T_DIR/good.json" "$CONF"
	edit "del c['portals'][1]; c['targets'][0]['portals'] = ['tcp0']"
	: >"$T_DIR/gw.log"
	kill -HUP "$GP"
	closed=0
	for i in $(seq 1 30); do
		t_port_open "$T_HOST" "$P2" || { closed=1; break; }
		sleep 0.1
	done
	[ "$closed" = 1 ] && t_port_open "$T_HOST" "$P1" &&
		pass "SIGHUP $what: a portal taken out of the file stops listening" ||
		fail "SIGHUP portal removal ($mode)" "port $P2 still open"
	if [ "$mode" = socket ]; then
		# A client of the socket (the agent) applies a configuration: from then on the
		# agent's store is the truth, and a reload of the file would be undone by it later,
		# silently. SIGHUP says so and changes nothing.
		applied=$(gw_ctl "$T_DIR/ctl.sock" \
			"{\"op\": \"apply\", \"config\": $(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))))' "$CONF")}")
		edit "c['targets'][0]['luns'].append({'lun': 2, 'product': 'fromfile', 'backstore': {'type': 'ram', 'size': '4M'}})"
		: >"$T_DIR/gw.log"
		kill -HUP "$GP"
		if echo "$applied" | grep -q '"ok": *true' &&
			log_has "managed by its agent over the control socket" && t_alive "$GP" &&
			! iscsi-inq "iscsi://$T_HOST:$P1/$TG_IQN/2" 2>&1 | grep -q "Product:fromfile" &&
			iscsi-inq "iscsi://$T_HOST:$P1/$TG_IQN/0" >/dev/null 2>&1; then
			pass "SIGHUP after a client applied over the socket: refused with a reason, nothing changes"
		else
			fail "SIGHUP on an agent-managed gateway" "apply: $applied; $(tail -n 3 "$T_DIR/gw.log" | tr '\n' ' ')"
		fi
	fi
	gw_stop "$GP"
done

# ---- the agent ----------------------------------------------------------------------------
if [ -x "$T_BUILD/isergw-agent" ]; then
	AP_PORT=$(t_free_port)
	ST=$T_DIR/agent
	t_daemon_start agent agent "$T_DIR/agent.log" "$T_BUILD/isergw-agent" --state-dir "$ST" \
		--listen "$T_HOST:$AP_PORT" --webui-dir ""
	AP=$T_LAST_PID
	if t_wait_port "$AP" "$AP_PORT" 15; then
		tok=$("$T_BUILD/isergw-agent" --state-dir "$ST" --add-token reload-test --role read)
		code() {
			curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $tok" \
				"http://$T_HOST:$AP_PORT/api/v1/targets"
		}
		code_is() { [ "$(code)" = "$1" ]; }
		c1=$(code)
		kill -HUP "$AP"
		# The signal is handled on the agent's loop: asked again until it answers 200 (5 s).
		t_wait_for 5 code_is 200
		c2=$(code)
		[ "$c1" = 401 ] && [ "$c2" = 200 ] && t_alive "$AP" &&
			pass "agent SIGHUP reads the token list again (401 before, 200 after)" ||
			fail "agent SIGHUP" "HTTP $c1 before, $c2 after"
		echo '{' >"$ST/tokens.json"
		kill -HUP "$AP"
		t_wait_for 5 grep -q "keeping the 2 tokens in use" "$T_DIR/agent.log"
		c3=$(code)
		[ "$c3" = 200 ] && grep -q "keeping the 2 tokens in use" "$T_DIR/agent.log" &&
			pass "agent SIGHUP with a broken token list keeps the tokens in use" ||
			fail "agent SIGHUP, broken list" "HTTP $c3; $(tail -n 2 "$T_DIR/agent.log" | tr '\n' ' ')"
	else
		fail "agent start" "$(tail -n 5 "$T_DIR/agent.log" | tr '\n' ' ')"
	fi
	t_stop_pid "$AP" 10
	[ "$T_STOP_RC" = 0 ] && pass "agent exits 0 on SIGTERM after the reloads" ||
		fail "agent stop" "status $T_STOP_RC"
fi
t_end

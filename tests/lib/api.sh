#!/bin/bash
# tests/lib/api.sh: REST helpers for suites that drive isergw-agent with curl (sourced after
# common.sh). Bodies land in $T_DIR/body, headers in $T_DIR/hdr, the status in CODE.
#
#   api METHOD PATH [BODY] [TOKEN]   TOKEN defaults to $ADMIN; "-" sends none. The base URL is
#                                    $API_URL, else $URL; IF_MATCH, when set, is sent.
#   jget EXPR                        a python expression over j, the last body as JSON
#   expect NAME STATUS [ERROR_CODE]  pass/fail on the last api call's status and error code
#   wait_for SECONDS CMD...          retries CMD every 0.2 s until it succeeds or time is up

api() {
	local m=$1 p=$2 body=${3:-} tok=${4:-$ADMIN} args=()
	[ "$tok" != - ] && args+=(-H "Authorization: Bearer $tok")
	[ -n "$body" ] && args+=(-H "Content-Type: application/json" --data-binary "$body")
	[ -n "${IF_MATCH:-}" ] && args+=(-H "If-Match: $IF_MATCH")
	CODE=$(curl -s -m 30 -o "$T_DIR/body" -D "$T_DIR/hdr" -w '%{http_code}' -X "$m" \
		"${args[@]}" "${API_URL:-$URL}$p" 2>/dev/null)
}

# jq-free JSON reads.
jget() {
	python3 -c "import json,sys; j=json.load(open('$T_DIR/body')); print($1)" 2>/dev/null
}

expect() {
	local name=$1 want=$2 ecode=${3:-}
	if [ "$CODE" != "$want" ]; then
		fail "$name" "HTTP $CODE, want $want: $(head -c 300 "$T_DIR/body" | tr '\n' ' ')"
		return 1
	fi
	if [ -n "$ecode" ] && [ "$(jget "j['error']['code']")" != "$ecode" ]; then
		fail "$name" "error code $(jget "j['error']['code']"), want $ecode"
		return 1
	fi
	pass "$name"
}

wait_for() {
	local secs=$1 i=0
	shift
	while ! "$@" >/dev/null 2>&1; do
		i=$((i + 1))
		[ "$i" -gt $((secs * 5)) ] && return 1
		sleep 0.2
	done
}

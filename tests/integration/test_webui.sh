#!/bin/bash
# The agent's static file server for the dashboard (agent/http/api_static.c), over HTTP with curl:
# the page and its files with their content types, ETag / Last-Modified revalidation, HEAD,
# and nothing outside --webui-dir: "..", encoded "..", hidden files, and symlinks out of the
# folder are all 404, while the API beside it keeps needing its token.
#
#   tests/integration/test_webui.sh        (BUILD=build|build/san)
set -u
. "$(dirname "$0")/../lib/common.sh"

t_begin webui
if [ "$TARGET" != isergwd ]; then
	skip webui "the dashboard is served by isergw-agent, which drives isergwd only"
	t_end
fi
AGENT=$T_BUILD/isergw-agent
if [ ! -x "$AGENT" ]; then
	skip webui "no $AGENT"
	t_end
fi
if ! t_need curl python3; then
	skip webui "needs curl and python3"
	t_end
fi

API_PORT=$(t_free_port)
URL=http://$T_HOST:$API_PORT
# A copy of webui/ with traps around it: a secret beside the folder, links out of it (relative,
# absolute, to a sibling folder whose name starts like the root's), a link inside it, a hidden
# file and a subfolder.
ROOT=$T_DIR/www/webui
mkdir -p "$ROOT/img" "$T_DIR/www/webui-old"
cp "$T_ROOT"/webui/* "$ROOT/"
echo "TOP-SECRET" >"$T_DIR/www/secret.txt"
echo "OLD-SECRET" >"$T_DIR/www/webui-old/old.js"
echo "HIDDEN" >"$ROOT/.htpasswd"
echo "<svg xmlns='http://www.w3.org/2000/svg'/>" >"$ROOT/img/logo.svg"
ln -s ../secret.txt "$ROOT/rel.txt"
ln -s "$T_DIR/www/secret.txt" "$ROOT/abs.txt"
ln -s ../webui-old/old.js "$ROOT/sib.js"
ln -s /etc/passwd "$ROOT/passwd"
ln -s app.js "$ROOT/alias.js"
# A file whose URL path is exactly 1023 bytes: a longer request must never be cut down to it.
LONG_DIR=$(printf 'd%.0s' $(seq 1 200))
LONG_REL=$LONG_DIR/$LONG_DIR/$LONG_DIR/$LONG_DIR/$LONG_DIR
LONG_REL=$LONG_REL/$(printf 'x%.0s' $(seq 1 $((1023 - 4 - ${#LONG_REL} - 1))))
mkdir -p "$ROOT/$(dirname "$LONG_REL")"
echo "LONG" >"$ROOT/$LONG_REL"

agent_start() {
	ASAN_OPTIONS="log_path=$T_DIR/san/asan-agent:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
		UBSAN_OPTIONS="log_path=$T_DIR/san/ubsan-agent${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
		t_daemon_start agent agent "$T_DIR/agent.$1.log" \
		"$AGENT" --state-dir "$T_DIR/state" --listen "$T_HOST:$API_PORT" "${@:2}"
	AGENT_PID=$T_LAST_PID
	t_wait_port "$AGENT_PID" "$API_PORT" 15
}

# agent_stop: SIGTERM gives exit 0 (alive until then, no SIGKILL); any sanitizer report fails
# the suite (t_stop_checked).
agent_stop() {
	t_stop_checked "$AGENT_PID" agent && pass "agent-stop"
}

# get PATH [CURL ARGS...]: sets CODE and TYPE; body in $T_DIR/body, headers in $T_DIR/hdr.
get() {
	local p=$1
	shift
	local out
	# curl leaves the output file alone when no body comes (304, HEAD).
	rm -f "$T_DIR/body"
	out=$(curl -s --path-as-is -o "$T_DIR/body" -D "$T_DIR/hdr" \
		-w '%{http_code} %{content_type}' "$@" "$URL$p" 2>/dev/null)
	CODE=${out%% *}
	TYPE=${out#* }
}

hdr() {
	sed -n "s/^$1: //Ip" "$T_DIR/hdr" | tr -d '\r' | head -n 1
}

# served NAME PATH FILE TYPE: 200, the file's exact bytes, and its content type.
served() {
	get "$2"
	if [ "$CODE" != 200 ]; then
		fail "$1" "HTTP $CODE for $2"
	elif ! cmp -s "$T_DIR/body" "$3"; then
		fail "$1" "the body of $2 is not $3"
	elif [ "${TYPE%%;*}" != "$4" ]; then
		fail "$1" "Content-Type $TYPE, want $4"
	else
		pass "$1"
	fi
}

# refused NAME PATH: 404 and none of the secrets in the answer.
refused() {
	get "$2"
	if [ "$CODE" != 404 ]; then
		fail "$1" "HTTP $CODE for $2, want 404"
	elif grep -q 'SECRET\|HIDDEN\|root:' "$T_DIR/body"; then
		fail "$1" "404 but the body leaks a file: $(head -c 100 "$T_DIR/body")"
	else
		pass "$1"
	fi
}

# malformed NAME PATH [CURL ARGS...]: 400 with the API's JSON error (bad_request), nothing
# leaked: the router refuses the path before any file or resource sees it.
malformed() {
	local name=$1 p=$2
	shift 2
	get "$p" "$@"
	if [ "$CODE" != 400 ]; then
		fail "$name" "HTTP $CODE for $p, want 400"
	elif ! python3 -c "import json,sys; e=json.load(open(sys.argv[1]))['error']; \
sys.exit(not (e['code'] == 'bad_request' and e['message']))" "$T_DIR/body" 2>/dev/null; then
		fail "$name" "400 without the API's JSON error: $(head -c 200 "$T_DIR/body")"
	elif grep -q 'SECRET\|HIDDEN\|root:\|demo' "$T_DIR/body"; then
		fail "$name" "400 but the body leaks: $(head -c 100 "$T_DIR/body")"
	else
		pass "$name"
	fi
}

if ! agent_start 1 --webui-dir "$ROOT"; then
	fail start "the agent did not start: $(tail -n 5 "$T_DIR/agent.1.log" | tr '\n' ' ')"
	t_end
fi
TOKEN=$(cat "$T_DIR/state/admin.token")

served "GET / is the dashboard page" / "$ROOT/index.html" text/html
served "GET /ui/ is the page too" /ui/ "$ROOT/index.html" text/html
served "GET /ui/app.js (text/javascript)" /ui/app.js "$ROOT/app.js" text/javascript
served "GET /ui/style.css (text/css)" /ui/style.css "$ROOT/style.css" text/css
served "GET /ui/img/logo.svg (a subfolder, image/svg+xml)" /ui/img/logo.svg "$ROOT/img/logo.svg" \
	image/svg+xml
served "a symlink inside the folder is followed" /ui/alias.js "$ROOT/app.js" text/javascript

get /
check "the page needs no token, and carries no-cache, nosniff and a CSP" \
	test "$(hdr Cache-Control)" = no-cache -a "$(hdr X-Content-Type-Options)" = nosniff \
	-a -n "$(hdr Content-Security-Policy)" -a -n "$(hdr Last-Modified)"

get /ui/app.js
ETAG=$(hdr ETag)
get /ui/app.js -H "If-None-Match: $ETAG"
check "If-None-Match with the ETag gives 304 and no body" \
	test -n "$ETAG" -a "$CODE" = 304 -a ! -s "$T_DIR/body"
get /ui/app.js -H 'If-None-Match: "0-0"'
check "a stale ETag gets the file again" test "$CODE" = 200 -a -s "$T_DIR/body"
# curl -I writes the headers where the body would go: the script's text must not be there.
get /ui/app.js -I
check "HEAD gives the headers (Content-Length of the file) and no body" \
	test "$CODE" = 200 -a "$(hdr Content-Length)" = "$(stat -c %s "$ROOT/app.js")" -a \
	"$(grep -c "use strict" "$T_DIR/body")" = 0
get /ui/app.js -X POST -d x
check "POST to a file is 405 with Allow: GET, HEAD" \
	test "$CODE" = 405 -a "$(hdr Allow)" = "GET, HEAD"

malformed "../ out of the folder: 400" /ui/../secret.txt
malformed "../ from a subfolder: 400" /ui/img/../../secret.txt
malformed "percent-encoded ..: 400" /ui/%2e%2e/secret.txt
malformed "percent-encoded slash and ..: 400" /ui/..%2fsecret.txt
malformed "./ segment: 400" /ui/./app.js
malformed "empty segment: 400" /ui//app.js
malformed "an encoded NUL in a file name: 400" /ui/app.js%00.png
malformed "invalid UTF-8 in a file name: 400" /ui/%ff.js
refused "a hidden file" /ui/.htpasswd
refused "a relative symlink out of the folder" /ui/rel.txt
refused "an absolute symlink out of the folder" /ui/abs.txt
refused "a symlink to a sibling folder named like the root" /ui/sib.js
refused "a symlink to /etc/passwd" /ui/passwd
refused "a folder" /ui/img/
refused "a missing file" /ui/nope.js
served "a 1023-byte path is served" "/ui/$LONG_REL" "$ROOT/$LONG_REL" application/octet-stream
refused "a longer path is not cut down to it" "/ui/${LONG_REL}zz"
malformed "an absolute path in the URL: 400" //etc/passwd

get /api/v1/targets
check "the API beside the files still needs a token (401)" test "$CODE" = 401
get /api/v1/targets -H "Authorization: Bearer $TOKEN"
check "and answers with one" test "$CODE" = 200
get /metrics
check "/metrics is not a file (401)" test "$CODE" = 401
# Portal status for the dashboard: without a gateway the agent says it cannot know, and why.
curl -s -o /dev/null -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
	--data-binary "{\"name\":\"tcp0\",\"address\":\"$T_HOST\",\"port\":3260}" \
	"$URL/api/v1/portals"
get /api/v1/portals -H "Authorization: Bearer $TOKEN"
check "GET /portals: status listening null, with the reason, without a gateway" \
	python3 -c "import json,sys; p=json.load(open(sys.argv[1]))['portals'][0]['status']; \
sys.exit(not (p['listening'] is None and '--gateway-socket' in p['reason']))" "$T_DIR/body"
get /api/v1/portals/tcp0 -H "Authorization: Bearer $TOKEN"
check "GET /portals/NAME has no status (it round-trips through PUT)" \
	python3 -c "import json,sys; sys.exit('status' in json.load(open(sys.argv[1])))" "$T_DIR/body"

# Hostile paths on the API, for every method: a percent-decoded NUL once ended the path, so
# GET /targets/%00/luns/0 listed the targets and .../demo%00junk named the demo target. Each
# must be a 400 that never reaches a resource: the demo target is untouched throughout.
DEMO=iqn.2026-11.org.isergw:demo
AUTH=(-H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json')
curl -s -o /dev/null "${AUTH[@]}" --data-binary \
	"{\"name\":\"$DEMO\",\"alias\":\"before\",\"allow_any_initiator\":true,\"portals\":[\"tcp0\"]}" \
	"$URL/api/v1/targets"
get "/api/v1/targets/$DEMO" "${AUTH[@]}"
check "the demo target exists (alias before)" test "$CODE" = 200 -a \
	"$(python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('alias'))" \
	"$T_DIR/body")" = before
malformed "GET /targets/%00/luns/0: 400" /api/v1/targets/%00/luns/0 "${AUTH[@]}"
malformed "GET /targets/DEMO%00junk: 400" "/api/v1/targets/$DEMO%00junk" "${AUTH[@]}"
malformed "GET without a token: 400 before the token is asked for" /api/v1/targets/%00
malformed "GET /targets/%ff (invalid UTF-8): 400" /api/v1/targets/%ff "${AUTH[@]}"
malformed "GET /targets/%c0%af (overlong /): 400" /api/v1/targets/%c0%af "${AUTH[@]}"
malformed "GET an encoded / inside a segment: 400" "/api/v1/targets/$DEMO%2Fluns" "${AUTH[@]}"
malformed "GET a .. segment: 400" "/api/v1/targets/$DEMO/luns/../acls" "${AUTH[@]}"
malformed "GET an encoded .. segment: 400" "/api/v1/targets/$DEMO/%2E%2E" "${AUTH[@]}"
malformed "GET a . segment: 400" "/api/v1/./targets" "${AUTH[@]}"
malformed "GET an empty segment: 400" "/api/v1//targets" "${AUTH[@]}"
malformed "GET a malformed escape: 400" "/api/v1/targets/%zz" "${AUTH[@]}"
malformed "PUT /targets/DEMO%00junk: 400" "/api/v1/targets/$DEMO%00junk" "${AUTH[@]}" \
	-X PUT --data-binary '{"alias":"hostile","allow_any_initiator":true,"portals":["tcp0"]}'
malformed "PUT a . segment: 400" "/api/v1/targets/./$DEMO" "${AUTH[@]}" \
	-X PUT --data-binary '{"alias":"hostile","allow_any_initiator":true,"portals":["tcp0"]}'
malformed "POST /targets%00x: 400" "/api/v1/targets%00x" "${AUTH[@]}" --data-binary \
	'{"name":"iqn.2026-11.org.isergw:hostile","allow_any_initiator":true,"portals":["tcp0"]}'
malformed "POST an empty segment: 400" "/api/v1//targets" "${AUTH[@]}" --data-binary \
	'{"name":"iqn.2026-11.org.isergw:hostile","allow_any_initiator":true,"portals":["tcp0"]}'
malformed "DELETE /targets/DEMO%00junk: 400" "/api/v1/targets/$DEMO%00junk" "${AUTH[@]}" \
	-X DELETE
malformed "DELETE an encoded .. segment: 400" "/api/v1/targets/$DEMO/luns/%2e%2e" \
	"${AUTH[@]}" -X DELETE
malformed "DELETE invalid UTF-8: 400" "/api/v1/targets/$DEMO%ed%a0%80" "${AUTH[@]}" -X DELETE
get /api/v1/targets "${AUTH[@]}"
check "after them the demo target is the only one, its alias unchanged" \
	python3 -c "import json,sys; t=json.load(open(sys.argv[1]))['targets']; \
sys.exit(not ([x['name'] for x in t] == ['$DEMO'] and t[0].get('alias') == 'before'))" \
	"$T_DIR/body"
get "/api/v1/targets/$DEMO" "${AUTH[@]}" -X DELETE
check "the demo target itself still deletes (204)" test "$CODE" = 204
agent_stop

# Without the folder: a clear 404 naming it, and the API unaffected.
if agent_start 2 --webui-dir "$T_DIR/missing"; then
	get /
	check "a missing --webui-dir: GET / is 404 naming the folder" \
		grep -q "no dashboard in $T_DIR/missing" "$T_DIR/body"
	check "and the agent's log says so at start" grep -q "no dashboard" "$T_DIR/agent.2.log"
	get /api/v1/health
	check "the API still answers" test "$CODE" = 200
	agent_stop
else
	fail "start without the folder" "$(tail -n 5 "$T_DIR/agent.2.log" | tr '\n' ' ')"
fi
t_end

#!/usr/bin/env bash
# CI entry of the JS interop test: builds a2abus (or takes the binary
# $A2ABUS_INTEROP_BIN, which ../run.sh builds), starts `a2abus serve` on a
# free loopback port with a throwaway data dir, waits until it is ready,
# runs the @a2a-js/sdk client tests against it, and stops it. Then it checks
# the JS baseline of compare.sh, echo-server.mjs (an @a2a-js/sdk server):
# a blocking send answers a COMPLETED task with the echoed text, and a short
# `a2abus load` (send and stream) against it has no failure.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
work="$(mktemp -d)"
pid=; epid=
trap 'kill $pid $epid 2>/dev/null || true; wait $pid $epid 2>/dev/null || true; rm -rf "$work"' EXIT
# Built as the README's tests build (race detector, no profile-guided
# optimisation): their build cache then holds every package it needs; and
# a race in serve or load fails this script (see stop_serve; load exits
# non-zero).
bin="${A2ABUS_INTEROP_BIN:-}"
if [ -z "$bin" ]; then
	bin="$work/a2abus"
	(cd "$root" && go build -race -pgo=off -o "$bin" ./cmd/a2abus)
fi
# A free loopback port and a random key, with what this script needs
# anyway (Node.js, coreutils): nothing beyond the README's prerequisites.
freeport() { node -e 'const s=require("net").createServer(); s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close() })'; }
port=$(freeport)
# The gRPC binding too, on a port of its own: the suite runs over it as
# well (A2ABUS_GRPC).
gport=$(freeport)
# The suite runs twice: against an a2abus without authentication, and
# against one that takes API keys (the SDK then presents one on every call).
serve() {
	"$bin" serve --listen "127.0.0.1:$port" --grpc-listen "127.0.0.1:$gport" --nats-listen off --data-dir "$work/data-$1" --agent echo --agent tck \
		--push true --push-allow-http true --push-allow-private true >"$work/serve.log" 2>&1 &
	pid=$!
	for _ in $(seq 1 120); do
		if curl -sf "http://127.0.0.1:$port/readyz" >/dev/null; then return 0; fi
		if ! kill -0 "$pid" 2>/dev/null; then cat "$work/serve.log"; exit 1; fi
		sleep 0.5
	done
	cat "$work/serve.log"; exit 1
}
# stop_serve stops it; a race it saw fails the run.
stop_serve() {
	kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
	if grep -q 'WARNING: DATA RACE' "$work/serve.log"; then
		cat "$work/serve.log"; exit 1
	fi
}
serve anonymous
A2ABUS_URL="http://127.0.0.1:$port" A2ABUS_GRPC="127.0.0.1:$gport" "$here/run.sh"
stop_serve
key="js-interop-$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"
A2ABUS_API_KEYS="$key=js-interop" serve keys
A2ABUS_URL="http://127.0.0.1:$port" A2ABUS_GRPC="127.0.0.1:$gport" A2ABUS_API_KEY="$key" "$here/run.sh"
stop_serve

# The JS echo server (node_modules is installed by run.sh above).
node "$here/echo-server.mjs" --listen "127.0.0.1:$port" >"$work/echo.log" 2>&1 &
epid=$!
for i in $(seq 1 100); do
	if curl -sf "http://127.0.0.1:$port/.well-known/agent-card.json" >/dev/null; then break; fi
	if ! kill -0 "$epid" 2>/dev/null || [ "$i" = 100 ]; then cat "$work/echo.log"; exit 1; fi
	sleep 0.1
done
curl -sf -H 'A2A-Version: 1.0' -H 'Content-Type: application/json' \
	-d '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"ci-1","role":"ROLE_USER","parts":[{"text":"hello js echo"}]}}}' \
	"http://127.0.0.1:$port/" >"$work/send.json"
node -e '
const t = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).result?.task;
const text = t?.artifacts?.[0]?.parts?.map((p) => p.text).join("");
if (t?.status?.state !== "TASK_STATE_COMPLETED" || text !== "hello js echo") {
	console.error("echo-server.mjs: blocking SendMessage did not complete with the echoed text:", JSON.stringify(t));
	process.exit(1);
}' "$work/send.json"
for mode in send stream; do
	"$bin" load --url "http://127.0.0.1:$port" --mode "$mode" --clients 4 --requests 50 --warmup 0s -o json >"$work/load-$mode.json"
	node -e '
const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
if (r.ok < 50 || r.failed !== 0) {
	console.error(`echo-server.mjs: a2abus load --mode ${r.mode}: ok ${r.ok}, failed ${r.failed}`, JSON.stringify(r.errors ?? {}));
	process.exit(1);
}' "$work/load-$mode.json"
done
echo "echo-server.mjs: COMPLETED with the echoed text; a2abus load send and stream: 50 ok each, none failed"

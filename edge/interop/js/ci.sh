#!/usr/bin/env bash
# CI entry of the JS interop test: builds a2abus, starts `a2abus serve` on a
# free loopback port with a throwaway data dir, waits until it is ready,
# runs the @a2a-js/sdk client tests against it, and stops it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
work="$(mktemp -d)"
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
(cd "$root" && go build -o "$work/a2abus" ./cmd/a2abus)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 18089)
# The suite runs twice: against an a2abus without authentication, and
# against one that takes API keys (the SDK then presents one on every call).
serve() {
	"$work/a2abus" serve --listen "127.0.0.1:$port" --nats-listen off --data-dir "$work/data-$1" --agent echo --agent tck >"$work/serve.log" 2>&1 &
	pid=$!
	for _ in $(seq 1 120); do
		if curl -sf "http://127.0.0.1:$port/readyz" >/dev/null; then return 0; fi
		if ! kill -0 "$pid" 2>/dev/null; then cat "$work/serve.log"; exit 1; fi
		sleep 0.5
	done
	cat "$work/serve.log"; exit 1
}
serve anonymous
A2ABUS_URL="http://127.0.0.1:$port" "$here/run.sh"
kill "$pid"; wait "$pid" 2>/dev/null || true
key="js-interop-$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
A2ABUS_API_KEYS="$key=js-interop" serve keys
A2ABUS_URL="http://127.0.0.1:$port" A2ABUS_API_KEY="$key" "$here/run.sh"

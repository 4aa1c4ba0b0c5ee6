#!/usr/bin/env bash
# Worker scale-out on this machine, in one go: one `a2abus node` (NATS only),
# one `a2abus edge`, and 1..N `a2abus worker` processes of a sleep-bound
# agent (echo with a 50 ms delay, concurrency 8 per process), driven by
# `a2abus load` with 64 clients. Each step starts from a fresh store and
# prints tasks/s against the one-worker step of the same run, and against
# linear scaling.
#
#   cmd/a2abus/bench/scale.sh [max-workers] [load flags...]   e.g. scale.sh 4
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
max="${1:-4}"; shift || true
tmp="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
(cd "$root" && go build -o "$tmp/a2abus" ./cmd/a2abus)
cat >"$tmp/slow.json" <<'JSON'
{"agents": [{"name": "slow", "kind": "echo", "delay": "50ms", "concurrency": 8}]}
JSON
nats=127.0.0.1:9401 edge=127.0.0.1:9400
"$tmp/a2abus" credentials --dir "$tmp/creds" >/dev/null # the node's users; edge and worker present theirs

wait_url() { for _ in $(seq 150); do curl -sf "$1" >/dev/null && return 0; sleep 0.1; done; echo "no answer from $1" >&2; return 1; }
step() { # workers
	local data="$tmp/data-$1" pids=()
	"$tmp/a2abus" node --nats-listen "$nats" --data-dir "$data" --nats-users "$tmp/creds/users.json" >"$tmp/node.log" 2>&1 & pids+=($!)
	sleep 0.5
	NATS_URL="nats://$nats" NATS_CREDS="$tmp/creds/edge" "$tmp/a2abus" edge --listen "$edge" --public-url "http://$edge" --config "$tmp/slow.json" >"$tmp/edge.log" 2>&1 & pids+=($!)
	for _ in $(seq "$1"); do
		NATS_URL="nats://$nats" NATS_CREDS="$tmp/creds/worker" "$tmp/a2abus" worker --config "$tmp/slow.json" >>"$tmp/workers.log" 2>&1 & pids+=($!)
	done
	wait_url "http://$edge/agents/slow/.well-known/agent-card.json"
	"$tmp/a2abus" load --url "http://$edge/agents/slow" --clients 64 --duration 10s --warmup 2s -o json "$@" >"$tmp/w$1.json"
	kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null || true
	rm -rf "$data"
}
for n in $(seq "$max"); do step "$n" "$@"; done
python3 - "$tmp" "$max" <<'PY'
import json, sys
tmp, n = sys.argv[1], int(sys.argv[2])
base = json.load(open("%s/w1.json" % tmp))["perSecond"]
print("| workers | tasks/s | vs 1 worker | x linear | p99 ms | failed |")
print("|---|---|---|---|---|---|")
for i in range(1, n + 1):
    r = json.load(open("%s/w%d.json" % (tmp, i)))
    print("| %d | %.1f | %.2fx | %.2f | %.1f | %d |" % (i, r["perSecond"], r["perSecond"] / base, r["perSecond"] / base / i, r["latencyMs"]["p99"], r["failed"]))
PY

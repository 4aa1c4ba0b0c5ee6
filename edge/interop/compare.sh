#!/usr/bin/env bash
# Side-by-side load comparison on this machine, in one go: a2abus serve
# (embedded NATS, file store, echo agent) against a2agoecho (the official
# a2a-go v2 server, in-memory store, an equivalent echo agent). Each round
# starts both servers fresh (a2a-go's in-memory store only grows, so a
# reused one slows down) and runs the same `a2abus load` against each.
#
#   edge/interop/compare.sh [rounds] [load flags...]   e.g. compare.sh 3 --clients 64
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
rounds="${1:-3}"; shift || true
bin="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$bin"' EXIT
(cd "$root" && go build -o "$bin/a2abus" ./cmd/a2abus)
(cd "$here" && go build -o "$bin/a2agoecho" ./cmd/a2agoecho)

wait_url() { for _ in $(seq 100); do curl -sf "$1" >/dev/null && return 0; sleep 0.1; done; echo "no answer from $1" >&2; return 1; }
measure() { # name url
	"$bin/a2abus" load --url "$2" --clients 64 --duration 10s --warmup 2s -o json "${@:3}" >"$bin/$1.json"
	python3 - "$bin/$1.json" "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); l = r["latencyMs"]
print("%-10s %8.1f tasks/s  p50 %7.2f  p90 %7.2f  p99 %7.2f ms  failed %d" % (sys.argv[2], r["perSecond"], l["p50"], l["p90"], l["p99"], r["failed"]))
PY
}
for i in $(seq "$rounds"); do
	echo "round $i"
	data="$(mktemp -d)"
	"$bin/a2abus" serve --listen 127.0.0.1:9731 --nats-listen 127.0.0.1:9732 --data-dir "$data" --rate-limit 0 --max-unfinished 0 --max-unfinished-bytes 0 >"$bin/serve.log" 2>&1 &
	spid=$!
	wait_url http://127.0.0.1:9731/.well-known/agent-card.json
	measure a2abus http://127.0.0.1:9731 "$@"
	kill $spid; wait $spid 2>/dev/null || true; rm -rf "$data"
	"$bin/a2agoecho" --listen 127.0.0.1:9733 >"$bin/goecho.log" 2>&1 &
	gpid=$!
	wait_url http://127.0.0.1:9733/.well-known/agent-card.json
	measure a2a-go http://127.0.0.1:9733 "$@"
	kill $gpid; wait $gpid 2>/dev/null || true
	python3 - "$bin/a2abus.json" "$bin/a2a-go.json" "$bin/ratios" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
r, p = a["perSecond"] / b["perSecond"], a["latencyMs"]["p99"] / b["latencyMs"]["p99"]
print("ratio a2abus/a2a-go: %.2fx tasks/s, p99 %.2fx" % (r, p))
open(sys.argv[3], "a").write("%f %f\n" % (r, p))
PY
done
# The machine is shared and noisy: the summary is the median round, with
# the spread, rather than any single figure.
python3 - "$bin/ratios" <<'PY'
import statistics, sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1])]
r, p = [x[0] for x in rows], [x[1] for x in rows]
print("median of %d rounds: %.2fx tasks/s (min %.2fx, max %.2fx), p99 %.2fx (max %.2fx)" % (len(rows), statistics.median(r), min(r), max(r), statistics.median(p), max(p)))
PY

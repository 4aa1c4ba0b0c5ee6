#!/usr/bin/env bash
# A/B of a2abus builds in one sitting: the way a performance change is
# judged (ARCHITECTURE's Where the time goes) when compare.sh's three
# servers are more than the question needs. It builds a2abus at each
# revision given (a git revision, or "." for the working tree as it is;
# an arm "REV FLAGS..." in one word also gives that arm's serve its own
# flags, so one build can be measured against itself with a setting
# changed, e.g. ". --heap-factor 2"), then, round after round, starts each build's `serve` fresh (new data
# directory, embedded NATS, echo agent, no request limits) and drives it
# with `a2abus load` (the working tree's, the same for every build), the
# builds taking turns in an order that flips every round so drift on a
# shared machine hits them alike. Per run it prints tasks/s, p50 and p99,
# the CPU serve's process spent per task (user+system over the warm-up and
# the run, divided by the tasks at the measured rate), the allocations and
# bytes it allocated per task (its go_memstats_* counters, the same way),
# and right after the run its VmRSS and live heap (go_gc_heap_live_bytes,
# what the last collection kept; builds before it was exported show
# none); at the end the median of each figure per build.
#
#   cmd/a2abus/bench/ab.sh [-r rounds] [-c clients] [-d seconds] REV... [-- load flags...]
#   e.g. ab.sh -r 4 -c 1 -d 5 HEAD~1 .      one client, 4 rounds of 5 s
#        ab.sh -c 16 HEAD . -- --mode stream
#        ab.sh -c 64 . ". --heap-factor 2"   one build, a setting A/B
#
# Defaults: 4 rounds, 1 client, 5 s measured after 1 s of warm-up. Extra
# `serve` flags for every build: AB_SERVE_FLAGS; the agent driven: AB_PATH,
# a path on serve's URL (default none: serve's own echo agent); a server
# started fresh beside every serve: AB_BESIDE, a command line, with
# AB_BESIDE_URL, a URL that answers once it is up. E.g. the remote kind in
# front of a2a-go (edge/interop/cmd/a2agoecho, whose store only grows):
#   AB_BESIDE="$bin/a2agoecho --listen 127.0.0.1:9743"
#   AB_BESIDE_URL=http://127.0.0.1:9743/.well-known/agent-card.json
#   AB_SERVE_FLAGS="--config proxy.json" AB_PATH=/agents/goecho ab.sh ...
# Ports 9761–9763 (compare.sh
# uses 9731–9740, proxy.sh 9741–9744, capacity.sh 9750–9779, tck.sh 9801–9803).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
rounds=4 clients=1 secs=5 warm=1
while getopts "r:c:d:" o; do
	case "$o" in
	r) rounds="$OPTARG" ;;
	c) clients="$OPTARG" ;;
	d) secs="$OPTARG" ;;
	*) sed -n '2,35p' "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
revs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do revs+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
extra=("$@")
if [ ${#revs[@]} -lt 1 ]; then sed -n '2,35p' "$0" >&2; exit 2; fi

tmp="$(mktemp -d)"
pid= bpid=
trap 'kill $pid $bpid 2>/dev/null || true; wait $pid $bpid 2>/dev/null || true; rm -rf "$tmp"' EXIT
(cd "$root" && go build -o "$tmp/load" ./cmd/a2abus)
names=() flags=()
declare -A built # revision -> the build of it, made once
for i in "${!revs[@]}"; do
	read -r rev armflags <<<"${revs[$i]}"
	names+=("$i:${revs[$i]}")
	flags+=("${armflags:-}")
	mkdir -p "$tmp/b$i"
	if [ -n "${built[$rev]:-}" ]; then
		cp "${built[$rev]}" "$tmp/b$i/a2abus"
	elif [ "$rev" = "." ]; then
		(cd "$root" && go build -o "$tmp/b$i/a2abus" ./cmd/a2abus)
	else
		git -C "$root" worktree add -f --detach "$tmp/src$i" "$rev" -q
		(cd "$tmp/src$i" && go build -o "$tmp/b$i/a2abus" ./cmd/a2abus)
		git -C "$root" worktree remove -f "$tmp/src$i"
	fi
	built[$rev]="$tmp/b$i/a2abus"
done

url=http://127.0.0.1:9761
cputicks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
# gauge NAME: the value of an unlabelled metric of serve's, or nan.
gauge() { curl -sf http://127.0.0.1:9763/metrics | awk -v n="$1" '$1 == n {v = $2} END {print (v == "" ? "nan" : v)}'; }
# beside: AB_BESIDE started fresh, once AB_BESIDE_URL answers.
beside() {
	[ -n "${AB_BESIDE:-}" ] || return 0
	bash -c "exec $AB_BESIDE" >"$tmp/beside.log" 2>&1 &
	bpid=$!
	for _ in $(seq 300); do
		if curl -sf "${AB_BESIDE_URL:?AB_BESIDE wants AB_BESIDE_URL}" >/dev/null; then return 0; fi
		kill -0 "$bpid" 2>/dev/null || break
		sleep 0.1
	done
	echo "AB_BESIDE did not come up:" >&2; cat "$tmp/beside.log" >&2; exit 1
}
run() { # ROUND BUILD-INDEX
	rm -rf "$tmp/data"
	beside
	# shellcheck disable=SC2086 # AB_SERVE_FLAGS and an arm's flags are lists of flags
	"$tmp/b$2/a2abus" serve --listen 127.0.0.1:9761 --nats-listen 127.0.0.1:9762 --metrics-listen 127.0.0.1:9763 --data-dir "$tmp/data" \
		--rate-limit 0 --max-unfinished 0 --max-unfinished-bytes 0 ${AB_SERVE_FLAGS:-} ${flags[$2]} >"$tmp/serve.log" 2>&1 &
	pid=$!
	local ok=
	for _ in $(seq 300); do
		if curl -sf "$url/.well-known/agent-card.json" >/dev/null; then ok=1; break; fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if [ -z "$ok" ]; then echo "serve of ${names[$2]} did not come up:" >&2; cat "$tmp/serve.log" >&2; exit 1; fi
	local t0 t1 rss a0 a1 b0 b1 live
	t0="$(cputicks)" a0="$(gauge go_memstats_mallocs_total)" b0="$(gauge go_memstats_alloc_bytes_total)"
	"$tmp/load" load --url "$url${AB_PATH:-}" --clients "$clients" --duration "${secs}s" --warmup "${warm}s" -o json "${extra[@]}" >"$tmp/r$1-b$2.json"
	t1="$(cputicks)" a1="$(gauge go_memstats_mallocs_total)" b1="$(gauge go_memstats_alloc_bytes_total)"
	rss="$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")" live="$(gauge go_gc_heap_live_bytes)"
	kill "$pid" $bpid; wait "$pid" $bpid 2>/dev/null || true; pid= bpid=
	echo "$((t1 - t0)) $rss $a0 $a1 $b0 $b1 $live" >"$tmp/r$1-b$2.proc"
	python3 "$tmp/figures.py" run "$tmp" "$1" "$2" "${names[$2]}"
}
# figures.py turns a run's files into its figures, for the per-run line
# and for the medians alike.
cat >"$tmp/figures.py" <<'PY'
import json, os, statistics, sys

def figures(tmp, r, b):
    d = json.load(open(os.path.join(tmp, "r%s-b%s.json" % (r, b))))
    ticks, kb, a0, a1, b0, b1, live = open(os.path.join(tmp, "r%s-b%s.proc" % (r, b))).read().split()
    tasks = d["perSecond"] * (float(os.environ["AB_SECS"]) + float(os.environ["AB_WARM"]))
    per = lambda x: x / tasks if tasks else float("nan")
    lat = d.get("latencyMs", {})
    first = d.get("firstEventMs")
    return {"rate": d["perSecond"], "p50": lat.get("p50", float("nan")), "p99": lat.get("p99", float("nan")),
            "first": first["p50"] if first else None,
            "cpu": per(int(ticks) * 1e6 / float(os.environ["CLK_TCK"])),
            "allocs": per(float(a1) - float(a0)), "kb": per((float(b1) - float(b0)) / 1024),
            "rss": int(kb) / 1024, "live": float(live) / 2**20, "failed": d.get("failed", 0)}

def line(f):
    return ("%8.0f/s  p50 %7.3f  p99 %8.2f ms%s  cpu/task %6.0f µs  allocs/task %5.0f (%5.1f KB)  rss %5.0f MiB  live heap %5.1f MiB"
            % (f["rate"], f["p50"], f["p99"], "  first event p50 %.3f ms" % f["first"] if f["first"] is not None else "",
               f["cpu"], f["allocs"], f["kb"], f["rss"], f["live"]))

if sys.argv[1] == "run":
    tmp, r, b, name = sys.argv[2:]
    f = figures(tmp, r, b)
    print("round %s  %-24s %s  failed %s" % (r, name, line(f), f["failed"]))
else:
    tmp, rounds, names = sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    print("median of %d round(s), %s s measured per run:" % (rounds, os.environ["AB_SECS"]))
    for b, name in enumerate(names):
        fs = [figures(tmp, r, b) for r in range(1, rounds + 1)]
        med = {k: statistics.median([f[k] for f in fs]) if all(f[k] is not None for f in fs) else None for k in fs[0]}
        print("  %-24s %s" % (name, line(med)))
PY
clk="$(getconf CLK_TCK)"
export AB_SECS="$secs" AB_WARM="$warm" CLK_TCK="$clk"
for r in $(seq "$rounds"); do
	order=("${!revs[@]}")
	if [ $((r % 2)) -eq 0 ]; then mapfile -t order < <(printf '%s\n' "${!revs[@]}" | tac); fi
	for b in "${order[@]}"; do run "$r" "$b"; done
done
python3 "$tmp/figures.py" medians "$tmp" "$rounds" "${names[@]}"

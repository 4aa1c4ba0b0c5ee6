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
# the run, divided by the tasks at the measured rate) and its VmRSS right
# after; at the end the median of each figure per build.
#
#   cmd/a2abus/bench/ab.sh [-r rounds] [-c clients] [-d seconds] REV... [-- load flags...]
#   e.g. ab.sh -r 4 -c 1 -d 5 HEAD~1 .      one client, 4 rounds of 5 s
#        ab.sh -c 16 HEAD . -- --mode stream
#        ab.sh -c 64 . ". --heap-factor 2"   one build, a setting A/B
#
# Defaults: 4 rounds, 1 client, 5 s measured after 1 s of warm-up. Extra
# `serve` flags for every build: AB_SERVE_FLAGS. Ports 9761–9762 (compare.sh
# uses 9731–9740, proxy.sh 9741–9744, capacity.sh 9750–9779, tck.sh 9801–9803).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
rounds=4 clients=1 secs=5 warm=1
while getopts "r:c:d:" o; do
	case "$o" in
	r) rounds="$OPTARG" ;;
	c) clients="$OPTARG" ;;
	d) secs="$OPTARG" ;;
	*) sed -n '2,28p' "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
revs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do revs+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
extra=("$@")
if [ ${#revs[@]} -lt 1 ]; then sed -n '2,28p' "$0" >&2; exit 2; fi

tmp="$(mktemp -d)"
pid=
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
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
run() { # ROUND BUILD-INDEX
	rm -rf "$tmp/data"
	# shellcheck disable=SC2086 # AB_SERVE_FLAGS and an arm's flags are lists of flags
	"$tmp/b$2/a2abus" serve --listen 127.0.0.1:9761 --nats-listen 127.0.0.1:9762 --data-dir "$tmp/data" \
		--rate-limit 0 --max-unfinished 0 --max-unfinished-bytes 0 ${AB_SERVE_FLAGS:-} ${flags[$2]} >"$tmp/serve.log" 2>&1 &
	pid=$!
	local ok=
	for _ in $(seq 300); do
		if curl -sf "$url/.well-known/agent-card.json" >/dev/null; then ok=1; break; fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if [ -z "$ok" ]; then echo "serve of ${names[$2]} did not come up:" >&2; cat "$tmp/serve.log" >&2; exit 1; fi
	local t0 t1 rss
	t0="$(cputicks)"
	"$tmp/load" load --url "$url" --clients "$clients" --duration "${secs}s" --warmup "${warm}s" -o json "${extra[@]}" >"$tmp/r$1-b$2.json"
	t1="$(cputicks)"
	rss="$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")"
	kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
	echo "$((t1 - t0)) $rss" >"$tmp/r$1-b$2.proc"
	python3 - "$tmp" "$1" "$2" "${names[$2]}" <<'PY'
import json, os, sys
tmp, r, b, name = sys.argv[1:]
d = json.load(open(os.path.join(tmp, "r%s-b%s.json" % (r, b))))
ticks, rss = map(int, open(os.path.join(tmp, "r%s-b%s.proc" % (r, b))).read().split())
tasks = d["perSecond"] * (float(os.environ["AB_SECS"]) + float(os.environ["AB_WARM"]))
cpu = ticks * 1e6 / float(os.environ["CLK_TCK"]) / tasks if tasks else float("nan")
lat = d.get("latencyMs", {})
first = d.get("firstEventMs")
print("round %s  %-24s %8.0f/s  p50 %7.3f  p99 %8.2f ms%s  cpu/task %6.0f µs  rss %5.0f MiB  failed %s"
      % (r, name, d["perSecond"], lat.get("p50", float("nan")), lat.get("p99", float("nan")),
         "  first event p50 %.3f ms" % first["p50"] if first else "", cpu, rss / 1024, d.get("failed", 0)))
PY
}
clk="$(getconf CLK_TCK)"
export AB_SECS="$secs" AB_WARM="$warm" CLK_TCK="$clk"
for r in $(seq "$rounds"); do
	order=("${!revs[@]}")
	if [ $((r % 2)) -eq 0 ]; then mapfile -t order < <(printf '%s\n' "${!revs[@]}" | tac); fi
	for b in "${order[@]}"; do run "$r" "$b"; done
done
python3 - "$tmp" "$rounds" "${names[@]}" <<'PY'
import json, os, statistics, sys
tmp, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print("median of %d round(s), %s s measured per run:" % (rounds, os.environ["AB_SECS"]))
for b, name in enumerate(names):
    rate, p50, p99, cpu, rss, first = [], [], [], [], [], []
    for r in range(1, rounds + 1):
        d = json.load(open(os.path.join(tmp, "r%d-b%d.json" % (r, b))))
        ticks, kb = map(int, open(os.path.join(tmp, "r%d-b%d.proc" % (r, b))).read().split())
        tasks = d["perSecond"] * (float(os.environ["AB_SECS"]) + float(os.environ["AB_WARM"]))
        lat = d.get("latencyMs", {})
        rate.append(d["perSecond"]); p50.append(lat.get("p50", float("nan"))); p99.append(lat.get("p99", float("nan")))
        cpu.append(ticks * 1e6 / float(os.environ["CLK_TCK"]) / tasks); rss.append(kb / 1024)
        if d.get("firstEventMs"):
            first.append(d["firstEventMs"]["p50"])
    m = statistics.median
    print("  %-24s %8.0f/s  p50 %7.3f  p99 %8.2f ms%s  cpu/task %6.0f µs  rss %5.0f MiB" % (name, m(rate), m(p50), m(p99),
          "  first event p50 %.3f ms" % m(first) if first else "", m(cpu), m(rss)))
PY

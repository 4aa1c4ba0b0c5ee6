#!/usr/bin/env bash
# Side-by-side load comparison on this machine, in one go, of three servers
# doing the same work per message (a stored task, WORKING, one artifact
# echoing the text, COMPLETED):
#
#   a2abus  `a2abus serve` (embedded NATS, file store, echo agent)
#   a2a-go  cmd/a2agoecho (the official a2a-go v2 server, in-memory store)
#   a2a-js  js/echo-server.mjs (the official @a2a-js/sdk server on express,
#           in-memory store)
#
# Per round and server it measures, with `a2abus load` over JSON-RPC 1.0:
#   c=1   blocking sends, 1 client: tasks/s and p50; once a round also the
#         floor under it, side by side with a2abus's p50: cmd/canned (a
#         bare net/http server answering a canned task of the same size)
#         to the same load generator, plus the bus's own round trips of
#         one task (BenchmarkJetStreamFloor/senders=1, bus/floor_bench_test.go)
#   c=64  blocking sends, 64 clients: tasks/s, p50 and p99, the CPU time
#         the server's process spent per task (user+system over the
#         warm-up and the run, divided by the tasks at the measured rate:
#         what one task costs, whatever the cores), then its resident
#         memory (VmRSS of its own process) right after
#   stream  streaming sends, 16 clients: streams/s and first-event p50
#   g64   blocking sends over gRPC (lf.a2a.v1), 64 clients, to the servers
#         that have the binding (a2abus --grpc-listen, a2a-go's a2agrpc):
#         tasks/s, p99 and the server's CPU per task; the summary gives a2abus's gRPC against its own
#         JSON-RPC c=64 in the same rounds
# Every measurement gets a freshly started server (the in-memory stores only
# grow, so a reused one slows down and holds more memory), and the three
# servers take turns per measurement so drift on a shared machine hits them
# alike. It prints a table per round, then the median over rounds per server
# and metric, and the ratios a2abus/a2a-js and a2abus/a2a-go of the medians.
#
#   edge/interop/compare.sh [rounds] [extra load flags...]   e.g. compare.sh 3 --text 'a longer message'
#
# The extra flags go to every load run, after compare.sh's own. Environment:
# COMPARE_SECONDS (measured seconds per run, default 10) and COMPARE_WARMUP
# (seconds, default 2) shorten a smoke run: COMPARE_SECONDS=3 compare.sh 1.
# COMPARE_CONFIGS="NAME=FILE ..." adds, per entry, this build of a2abus
# started with --config FILE (policy.json: a trust level with an agent
# list and approvals configured for another agent; audited.json: the same
# level audited), and the summary gives each against a2abus without one:
# COMPARE_CONFIGS="policy=policy/policy.json audited=policy/audited.json".
# COMPARE_BASE=REV adds a fourth server, a2abus built at the git revision
# REV ("base"), which takes its turns with the others: a change is judged
# by before and after measured in the same rounds, not in two runs the
# machine's drift between them would colour.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
rounds="${1:-3}"; shift || true
secs="${COMPARE_SECONDS:-10}"
warm="${COMPARE_WARMUP:-2}"
bin="$(mktemp -d)"
pid=
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$bin"' EXIT
(cd "$root" && go build -o "$bin/a2abus" ./cmd/a2abus)
(cd "$here" && go build -o "$bin/a2agoecho" ./cmd/a2agoecho && go build -o "$bin/canned" ./cmd/canned)
# The floor under one client's latency (issue 35): a bare net/http server
# answering a canned task (cmd/canned) and the bus's own round trips for
# one task with no a2abus code (bus.BenchmarkJetStreamFloor/senders=1).
(cd "$root" && go test -c -o "$bin/bus.test" ./bus)
"$here/js/deps.sh"

servers=(a2abus a2a-go a2a-js)
declare -A url=([a2abus]=http://127.0.0.1:9731 [a2a-go]=http://127.0.0.1:9733 [a2a-js]=http://127.0.0.1:9735 [base]=http://127.0.0.1:9737)
# The gRPC binding's addresses, of the servers that have one (a2a-js's SDK
# serves none).
declare -A gurl=([a2abus]=http://127.0.0.1:9736 [a2a-go]=http://127.0.0.1:9734)
# The process each server runs as, checked before its memory is read, so
# the figure is never a wrapper's.
declare -A comm=([a2abus]=a2abus [a2a-go]=a2agoecho [a2a-js]=node [base]=a2abus)
if [ -n "${COMPARE_BASE:-}" ]; then
	git -C "$root" worktree add -f --detach "$bin/base-src" "$COMPARE_BASE" -q
	(cd "$bin/base-src" && go build -o "$bin/base/a2abus" ./cmd/a2abus)
	git -C "$root" worktree remove -f "$bin/base-src"
	servers+=(base)
	# serve --help exits 2 and spells its flags with one dash.
	if { "$bin/base/a2abus" serve --help 2>&1 || true; } | grep -q -- '-grpc-listen '; then
		gurl[base]=http://127.0.0.1:9739
	fi
fi

# The config variants run on a2abus's own addresses: one server runs at a
# time.
declare -A cfgfile=()
for nc in ${COMPARE_CONFIGS:-}; do
	n="${nc%%=*}"
	cfgfile[$n]="$(cd "$here" && realpath "${nc#*=}")"
	servers+=("$n")
	url[$n]="${url[a2abus]}" gurl[$n]="${gurl[a2abus]}" comm[$n]=a2abus
done

# start NAME: starts the server fresh in the background, as the process
# itself (no wrapper shell: $pid is the server), and waits for its card.
start() {
	# Something already answering there (a server left over from another
	# run) would be measured in this one's place.
	if curl -s -o /dev/null --max-time 2 "${url[$1]}/" || { [ -n "${gurl[$1]:-}" ] && curl -s -o /dev/null --max-time 2 "${gurl[$1]}/"; }; then
		echo "something already listens on ${url[$1]} or ${gurl[$1]:-its gRPC address}: stop it first, or it is measured in $1's place" >&2
		return 1
	fi
	case "$1" in
	a2abus)
		rm -rf "$bin/data"
		"$bin/a2abus" serve --listen 127.0.0.1:9731 --nats-listen 127.0.0.1:9732 --grpc-listen 127.0.0.1:9736 --data-dir "$bin/data" \
			--rate-limit 0 --max-unfinished 0 --max-unfinished-bytes 0 >"$bin/$1.log" 2>&1 &
		;;
	base)
		rm -rf "$bin/data"
		"$bin/base/a2abus" serve --listen 127.0.0.1:9737 --nats-listen 127.0.0.1:9738 ${gurl[base]:+--grpc-listen 127.0.0.1:9739} --data-dir "$bin/data" \
			--rate-limit 0 --max-unfinished 0 --max-unfinished-bytes 0 >"$bin/$1.log" 2>&1 &
		;;
	a2a-go) "$bin/a2agoecho" --listen 127.0.0.1:9733 --grpc-listen 127.0.0.1:9734 >"$bin/$1.log" 2>&1 & ;;
	a2a-js) node "$here/js/echo-server.mjs" --listen 127.0.0.1:9735 >"$bin/$1.log" 2>&1 & ;;
	*)
		rm -rf "$bin/data"
		"$bin/a2abus" serve --listen 127.0.0.1:9731 --nats-listen 127.0.0.1:9732 --grpc-listen 127.0.0.1:9736 --data-dir "$bin/data" \
			--rate-limit 0 --max-unfinished 0 --max-unfinished-bytes 0 --config "${cfgfile[$1]}" >"$bin/$1.log" 2>&1 &
		;;
	esac
	pid=$!
	for _ in $(seq 200); do
		curl -sf "${url[$1]}/.well-known/agent-card.json" >/dev/null && return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	echo "$1 did not come up:" >&2; cat "$bin/$1.log" >&2; return 1
}
stop() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=; }

# floor ROUND: the two parts of the one-client floor, each measured once a
# round between the servers' one-client runs: the canned server's p50 to
# the same load generator, and the bus floor's time a task.
floor() {
	"$bin/canned" --listen 127.0.0.1:9740 >"$bin/canned.log" 2>&1 &
	pid=$!
	for _ in $(seq 100); do curl -sf http://127.0.0.1:9740/.well-known/agent-card.json >/dev/null && break; sleep 0.1; done
	"$bin/a2abus" load --url http://127.0.0.1:9740 --clients 1 --duration "${secs}s" --warmup "${warm}s" -o json >"$bin/r$1-floor-http.json" ||
		echo '{"ok": 0, "failed": -1}' >"$bin/r$1-floor-http.json"
	stop
	(cd "$root/bus" && "$bin/bus.test" -test.run '^$' -test.bench 'JetStreamFloor/senders=1$' -test.benchtime 2000x 2>"$bin/floor-bus.log") |
		awk '/^BenchmarkJetStreamFloor/ {print $3}' >"$bin/r$1-floor-bus.ns"
}

# cputicks: user+system clock ticks the server's process has used.
cputicks() { awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0; }

# measure ROUND KIND NAME LOADFLAGS...: one fresh server, one load run;
# for the c=64 run also the server's CPU ticks over the run and its VmRSS
# in kB right after.
measure() {
	local out="$bin/r$1-$2-$3" t0 target=(--url "${url[$3]}")
	if [ "$2" = g64 ]; then target=(--binding grpc --url "${gurl[$3]}"); fi
	start "$3"
	t0="$(cputicks)"
	"$bin/a2abus" load "${target[@]}" --duration "${secs}s" --warmup "${warm}s" -o json "${@:4}" "${extra[@]}" >"$out.json" ||
		echo '{"ok": 0, "failed": -1}' >"$out.json"
	if [ "$2" = c64 ] || [ "$2" = g64 ]; then
		local c; c="$(cat "/proc/$pid/comm" 2>/dev/null || true)"
		if [ "$c" = "${comm[$3]}" ]; then
			echo $(($(cputicks) - t0)) >"$out.cpu"
			awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" >"$out.rss"
		else
			echo "$3: no RSS, pid $pid is '$c', not ${comm[$3]} (did it exit?)" >&2
		fi
	fi
	stop
}

# report.py round N | summary: the per-round table, or the medians and
# ratios over every round measured so far.
cat >"$bin/report.py" <<'PY'
import json, os, statistics, sys
bindir, servers = sys.argv[1], os.environ["COMPARE_SERVERS"].split()
# metric: (heading, reader of one round's files for one server, format)
def load(r, kind, s):
    return json.load(open(os.path.join(bindir, "r%s-%s-%s.json" % (r, kind, s))))
def rss(r, s):
    return int(open(os.path.join(bindir, "r%s-c64-%s.rss" % (r, s))).read()) / 1024
def cpu(r, s, kind="c64"):
    ticks = int(open(os.path.join(bindir, "r%s-%s-%s.cpu" % (r, kind, s))).read())
    tasks = load(r, kind, s)["perSecond"] * (float(os.environ["COMPARE_SECONDS"]) + float(os.environ["COMPARE_WARMUP"]))
    return ticks * 1e6 / float(os.environ["CLK_TCK"]) / tasks
metrics = [
    ("c1/s",      lambda r, s: load(r, "c1", s)["perSecond"], "%9.0f"),
    ("c1 p50",    lambda r, s: load(r, "c1", s)["latencyMs"]["p50"], "%9.2f"),
    ("c64/s",     lambda r, s: load(r, "c64", s)["perSecond"], "%9.0f"),
    ("c64 p50",   lambda r, s: load(r, "c64", s)["latencyMs"]["p50"], "%9.2f"),
    ("c64 p99",   lambda r, s: load(r, "c64", s)["latencyMs"]["p99"], "%9.2f"),
    ("c64 cpuµs", lambda r, s: cpu(r, s), "%9.0f"),
    ("RSS MiB",   lambda r, s: rss(r, s), "%9.1f"),
    ("stream/s",  lambda r, s: load(r, "stream", s)["perSecond"], "%9.0f"),
    ("1st p50",   lambda r, s: load(r, "stream", s)["firstEventMs"]["p50"], "%9.2f"),
    ("g64/s",     lambda r, s: load(r, "g64", s)["perSecond"], "%9.0f"),
    ("g64 p99",   lambda r, s: load(r, "g64", s)["latencyMs"]["p99"], "%9.2f"),
    ("g64 cpuµs", lambda r, s: cpu(r, s, "g64"), "%9.0f"),
]
def failed(r, s):
    n = [load(r, k, s).get("failed", 0) for k in ("c1", "c64", "stream", "g64")
         if os.path.exists(os.path.join(bindir, "r%s-%s-%s.json" % (r, k, s)))]
    return "broken" if -1 in n else str(sum(n))
def value(f, r, s):
    try:
        return f(r, s)
    except (OSError, KeyError, TypeError, ZeroDivisionError, ValueError):
        return float("nan")
def table(rows, tail=None):
    print("%-8s" % "server" + "".join("%10s" % m[0] for m in metrics) + ("  %s" % tail[0] if tail else ""))
    for s in servers:
        print("%-8s" % s + "".join(" " + m[2] % rows[s][i] for i, m in enumerate(metrics)) + ("  %s" % tail[1](s) if tail else ""))
# The one-client floor (see floor in compare.sh): canned net/http p50 and
# the bus's time a task, in ms, and their sum.
def floor(r):
    http = json.load(open(os.path.join(bindir, "r%s-floor-http.json" % r)))["latencyMs"]["p50"]
    busms = float(open(os.path.join(bindir, "r%s-floor-bus.ns" % r)).read().split()[0]) / 1e6
    return http, busms, http + busms
def floorline(label, http, busms, total, c1):
    return "%s c=1 p50: a2abus %.2f ms, floor %.2f ms (net/http canned %.2f + JetStream floor %.2f): a2abus / floor %.2fx" % (label, c1, total, http, busms, c1 / total if total else float("nan"))
if sys.argv[2] == "round":
    r = sys.argv[3]
    table({s: [value(m[1], r, s) for m in metrics] for s in servers}, ("failed", lambda s: failed(r, s)))
    try:
        print(floorline("round " + r, *floor(r), value(metrics[1][1], r, "a2abus")))
    except (OSError, KeyError, ValueError, IndexError):
        print("round %s: no floor measured" % r)
    sys.exit()
rounds = sorted({f.split("-")[0][1:] for f in os.listdir(bindir) if f.startswith("r") and f.endswith(".json")}, key=int)
med = {s: [statistics.median([value(m[1], r, s) for r in rounds]) for m in metrics] for s in servers}
print("median of %d round(s), %s s measured per run:" % (len(rounds), os.environ.get("COMPARE_SECONDS", "10")))
table(med)
# Ratios the issue's targets are stated in: throughput above 1 is better,
# latency and memory below 1 are better.
# With a base build, its ratios too, and a2abus against it.
ratios = [("c=64 tasks/s", 2, "higher"), ("c=64 p99", 4, "lower"), ("c=1 p50", 1, "lower"),
          ("CPU per task at c=64", 5, "lower"), ("RSS after c=64", 6, "lower"),
          ("stream/s", 7, "higher"), ("stream first-event p50", 8, "lower"),
          ("gRPC c=64 tasks/s", 9, "higher"), ("gRPC c=64 p99", 10, "lower")]
for who in [s for s in ("a2abus", "base") if s in servers]:
    print("%-6s / other (of the medians)   vs a2a-js   vs a2a-go%s" % (who, "   vs base" if who == "a2abus" and "base" in servers else ""))
    for heading, i, better in ratios:
        a = med[who][i]
        ratio = lambda o: a / o if o else float("nan")
        line = "  %-31s %7.2fx   %7.2fx" % (heading, ratio(med["a2a-js"][i]), ratio(med["a2a-go"][i]))
        if who == "a2abus" and "base" in servers:
            line += "   %7.2fx" % ratio(med["base"][i])
        print(line + "   (%s is better)" % better)
try:
    fl = [floor(r) for r in rounds]
    med_floor = [statistics.median(f[i] for f in fl) for i in range(3)]
    print(floorline("median", *med_floor, med["a2abus"][1]) + ", a2abus / a2a-js %.2fx" % (med["a2abus"][1] / med["a2a-js"][1]))
except (OSError, KeyError, ValueError, IndexError, ZeroDivisionError):
    pass
# Each config variant against a2abus without one (the policy's cost).
for who in [s for s in servers if s not in ("a2abus", "base", "a2a-go", "a2a-js")]:
    print("%-8s / a2abus (of the medians)" % who)
    for heading, i, better in ratios[:4]:
        o = med["a2abus"][i]
        print("  %-31s %7.2fx   (%s is better)" % (heading, med[who][i] / o if o else float("nan"), better))
# The gRPC binding against the JSON-RPC binding of the same server, in the
# same rounds (issue 32's target: at least 1).
for who in [s for s in ("a2abus", "base", "a2a-go") if s in servers]:
    g, j = med[who][9], med[who][2]
    if g == g and j:
        print("%-6s gRPC / JSON-RPC c=64 tasks/s (of the medians): %.2fx" % (who, g / j))
PY

extra=("$@")
for i in $(seq "$rounds"); do
	for s in "${servers[@]}"; do measure "$i" c1 "$s" --clients 1; done
	floor "$i"
	for s in "${servers[@]}"; do measure "$i" c64 "$s" --clients 64; done
	for s in "${servers[@]}"; do measure "$i" stream "$s" --clients 16 --mode stream; done
	for s in "${servers[@]}"; do if [ -n "${gurl[$s]:-}" ]; then measure "$i" g64 "$s" --clients 64; fi; done
	echo "round $i (c1: 1 client; c64: 64 clients, server CPU µs per task, RSS right after; stream: 16 clients, first-event p50; g64: 64 clients over gRPC; latencies in ms)"
	COMPARE_SERVERS="${servers[*]}" COMPARE_SECONDS="$secs" COMPARE_WARMUP="$warm" CLK_TCK="$(getconf CLK_TCK)" python3 "$bin/report.py" "$bin" round "$i"
	echo
done
# The machine is shared and noisy: the summary is the median round per
# metric, rather than any single figure.
COMPARE_SERVERS="${servers[*]}" COMPARE_SECONDS="$secs" COMPARE_WARMUP="$warm" CLK_TCK="$(getconf CLK_TCK)" python3 "$bin/report.py" "$bin" summary

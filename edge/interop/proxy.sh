#!/usr/bin/env bash
# The proxy overhead of the `remote` agent kind (issue 35): what a client
# pays for reaching the official a2a-go v2 server (cmd/a2agoecho, echo
# agent, in-memory store) through a2abus rather than directly.
#
#   direct   client → a2a-go
#   through  client → a2abus edge → bus (task stored, work queued) →
#            worker of the remote agent → a2a-go → events relayed and
#            stored → answer
#
# Both paths are driven by `a2abus load` with blocking sends over JSON-RPC
# 1.0 (the same generator, the same message), at c=1 and c=64. The remote
# agent speaks to a2a-go in the binding PROXY_BINDING (default JSONRPC:
# JSON-RPC 1.0, a streaming SendStreamingMessage per task, as the remote
# kind always sends; GRPC: a2a-go's own gRPC binding, lf.a2a.v1). Every
# measurement gets fresh servers (a2a-go's store only grows, and so does
# a2abus's), and within a round the two paths take turns, the first of
# each pair alternating by round, so drift on a shared machine hits both
# alike. It prints a table per round, then the median over rounds of each
# figure, the overhead (through − direct) of p50 and p99 in ms, and whether
# the issue's targets (p50 ≤ 1 ms, p99 ≤ 5 ms at c=1 and at c=64) are met.
#
# That the sends through a2abus reach a2a-go is checked, not assumed:
# before each `through` run one message goes through and its answer must be
# a2a-go's echo (the artifact a2a-go names echo-<its task id>, the task id
# a2abus kept in a2abus.remote.taskId, the same text and status message as
# a direct answer), and a2a-go must know that task, COMPLETED; after every
# run a2a-go's count of the tasks it completed must cover the sends `load`
# counted as ok (which it does only for a COMPLETED answer), and no send may fail.
#
#   edge/interop/proxy.sh [rounds]          rounds default 3
#
# Environment: PROXY_SECONDS (measured seconds per run, default 10),
# PROXY_WARMUP (default 2), PROXY_BINDING (JSONRPC or GRPC),
# PROXY_CONCURRENCY (the remote agent's concurrency: tasks one serve sends
# to a2a-go at once; default 16, the kind's default), PROXY_PPROF (a
# loopback HOST:PORT: serve runs with --pprof there, for profiling a run
# from another terminal).
#
# Exit status: 1 when the setup failed (a build, a server that does not
# come up, the remote agent never online, a sample answer that is not
# a2a-go's); 3 when a run is not valid (sends failed, or a2a-go completed
# fewer tasks than load counted); 0 otherwise, targets met or not.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
rounds="${1:-3}"
secs="${PROXY_SECONDS:-10}"
warm="${PROXY_WARMUP:-2}"
binding="${PROXY_BINDING:-JSONRPC}"
conc="${PROXY_CONCURRENCY:-16}"
case "$binding" in JSONRPC | GRPC) ;; *) echo "PROXY_BINDING must be JSONRPC or GRPC, not $binding" >&2; exit 1 ;; esac
bin="$(mktemp -d)"
gpid= bpid=
trap 'stop; rm -rf "$bin"' EXIT
(cd "$root" && go build -o "$bin/a2abus" ./cmd/a2abus)
(cd "$here" && go build -o "$bin/a2agoecho" ./cmd/a2agoecho)

# Loopback addresses of this script's own (compare.sh uses 9731–9739).
gourl=http://127.0.0.1:9743
busurl=http://127.0.0.1:9741
agent=goecho
through="$busurl/agents/$agent"

# The config of serve: the remote agent alone (no local agent could answer
# in its place), allowed to reach a2a-go on loopback over plain HTTP.
cat >"$bin/proxy.json" <<EOF
{
  "outbound": {"allowLoopback": true, "requireHTTPS": false},
  "agents": [
    {"name": "$agent", "kind": "remote", "url": "$gourl", "binding": "$binding", "concurrency": $conc}
  ]
}
EOF

# waitcard URL PID NAME: polls URL's card until it answers or PID exits.
waitcard() {
	for _ in $(seq 200); do
		curl -sf "$1/.well-known/agent-card.json" >/dev/null && return 0
		kill -0 "$2" 2>/dev/null || break
		sleep 0.1
	done
	echo "$3 did not come up:" >&2; cat "$bin/$3.log" >&2; return 1
}

# startgo: a fresh a2a-go server (its gRPC binding too, which its card
# then declares, when the remote agent is to use it).
startgo() {
	local g=()
	if [ "$binding" = GRPC ]; then g=(--grpc-listen 127.0.0.1:9744); fi
	"$bin/a2agoecho" --listen 127.0.0.1:9743 "${g[@]}" >"$bin/a2a-go.log" 2>&1 &
	gpid=$!
	waitcard "$gourl" "$gpid" a2a-go
}

# startbus: a fresh serve (embedded NATS, empty data dir, no rate or
# backlog limits, as compare.sh runs it), then waits until the remote
# agent's monitor has read a2a-go's card and lists it online.
startbus() {
	local p=()
	if [ -n "${PROXY_PPROF:-}" ]; then p=(--pprof "$PROXY_PPROF"); fi
	rm -rf "$bin/data"
	"$bin/a2abus" serve --listen 127.0.0.1:9741 --nats-listen 127.0.0.1:9742 --data-dir "$bin/data" \
		--rate-limit 0 --max-unfinished 0 --max-unfinished-bytes 0 --config "$bin/proxy.json" "${p[@]}" >"$bin/a2abus.log" 2>&1 &
	bpid=$!
	waitcard "$busurl" "$bpid" a2abus
	for _ in $(seq 200); do
		if curl -sf "$busurl/a2a/agents" | python3 -c '
import json, sys
l = json.load(sys.stdin)
sys.exit(0 if any(a.get("agent") == sys.argv[1] and a.get("health") == "online" and a.get("workers", 0) > 0 for a in l["agents"]) else 1)' "$agent"; then
			return 0
		fi
		kill -0 "$bpid" 2>/dev/null || break
		sleep 0.1
	done
	echo "the remote agent $agent did not come online:" >&2; curl -s "$busurl/a2a/agents" >&2 || true; cat "$bin/a2abus.log" >&2; return 1
}

stop() {
	local p
	for p in $bpid $gpid; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	gpid= bpid=
}

# rpc URL METHOD PARAMS: one JSON-RPC 1.0 call, its whole answer.
rpc() {
	curl -sf "$1" -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' \
		-d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"$2\",\"params\":$3}"
}
send() {
	rpc "$1" SendMessage "{\"message\":{\"messageId\":\"$(python3 -c 'import uuid; print(uuid.uuid4())')\",\"role\":\"ROLE_USER\",\"parts\":[{\"text\":\"$2\"}]}}"
}

# sample: one message through a2abus and the same text directly; the
# answer through must be a2a-go's, and a2a-go must hold the task.
sample() {
	local text="proxy check $1" thr dir ext
	thr="$(send "$through" "$text")" || { echo "sample send through a2abus failed" >&2; return 1; }
	dir="$(send "$gourl" "$text")" || { echo "sample send to a2a-go failed" >&2; return 1; }
	ext="$(python3 - "$thr" "$dir" "$text" "$gourl" <<'PY'
import json, sys
thr, dir_, text, gourl = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
def task(a, who):
    if "result" not in a or "task" not in a["result"]:
        sys.exit("%s: no task in the answer: %s" % (who, json.dumps(a)[:400]))
    return a["result"]["task"]
t, d = task(thr, "through"), task(dir_, "direct")
md = t.get("metadata") or {}
ext = md.get("a2abus.remote.taskId", "")
def shape(t):
    arts = [(a.get("name"), [p.get("text") for p in a.get("parts", [])]) for a in t.get("artifacts", [])]
    msg = [p.get("text") for p in ((t["status"].get("message") or {}).get("parts") or [])]
    return t["status"]["state"], arts, msg
problems = []
if not ext or ext == t["id"]:
    problems.append("no external task id in a2abus.remote.taskId")
if md.get("a2abus.remote.url") != gourl:
    problems.append("a2abus.remote.url is %r, not %s" % (md.get("a2abus.remote.url"), gourl))
if [a.get("artifactId") for a in t.get("artifacts", [])] != ["echo-" + ext]:
    problems.append("artifact ids %r, not a2a-go's echo-%s" % ([a.get("artifactId") for a in t.get("artifacts", [])], ext))
if shape(t) != shape(d) or shape(t)[1] != [("echo", [text])]:
    problems.append("answer through %r differs from a2a-go's own %r" % (shape(t), shape(d)))
if problems:
    sys.exit("the answer through a2abus is not a2a-go's echo: " + "; ".join(problems))
print(ext)
PY
)" || return 1
	# a2a-go knows the task a2abus says it sent there, completed.
	rpc "$gourl" GetTask "{\"id\":\"$ext\"}" | python3 -c '
import json, sys
t = json.load(sys.stdin).get("result") or {}
sys.exit(0 if t.get("status", {}).get("state") == "TASK_STATE_COMPLETED" else "a2a-go does not hold task %s completed" % sys.argv[1])' "$ext"
}

# completed: how many tasks a2a-go's echo executor has completed (its own
# count: the SDK's ListTasks wants an authenticated caller).
completed() { curl -sf "$gourl/debug/completed"; }

cputicks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }

# measure ROUND PATH CLIENTS: fresh servers, one load run; what load
# reports, a2a-go's completed tasks after it (less the sample's), and the
# CPU ticks each server's process spent over the run.
measure() {
	local out="$bin/r$1-c$3-$2" target=$gourl g0 b0=0 before=0
	startgo
	if [ "$2" = through ]; then
		startbus
		sample "$1-c$3"
		b0="$(cputicks "$bpid")"
	fi
	before="$(completed)"
	g0="$(cputicks "$gpid")"
	if [ "$2" = through ]; then target=$through; fi
	"$bin/a2abus" load --url "$target" --clients "$3" --duration "${secs}s" --warmup "${warm}s" -o json >"$out.json" ||
		echo '{"ok": 0, "failed": -1}' >"$out.json"
	echo $(($(cputicks "$gpid") - g0)) >"$out.gocpu"
	if [ "$2" = through ]; then echo $(($(cputicks "$bpid") - b0)) >"$out.buscpu"; fi
	echo $(($(completed) - before)) >"$out.seen"
	stop
}

# report.py round N | summary
cat >"$bin/report.py" <<'PY'
import json, os, statistics, sys
bindir = sys.argv[1]
secs, warm = float(os.environ["PROXY_SECONDS"]), float(os.environ["PROXY_WARMUP"])
tck = float(os.environ["CLK_TCK"])
paths, cs = ("direct", "through"), (1, 64)
def load(r, c, p):
    return json.load(open(os.path.join(bindir, "r%s-c%d-%s.json" % (r, c, p))))
def ticks(r, c, p, who):
    f = os.path.join(bindir, "r%s-c%d-%s.%scpu" % (r, c, p, who))
    return int(open(f).read()) if os.path.exists(f) else None
def cpu(r, c, p, who):
    # CPU µs a task of the process over warm-up and run (tasks at the
    # measured rate over both).
    t = ticks(r, c, p, who)
    if t is None:
        return float("nan")
    return t * 1e6 / tck / (load(r, c, p)["perSecond"] * (secs + warm))
# column: (heading, reader, format)
cols = [
    ("tasks/s", lambda r, c, p: load(r, c, p)["perSecond"], "%9.0f"),
    ("p50 ms", lambda r, c, p: load(r, c, p)["latencyMs"]["p50"], "%9.2f"),
    ("p99 ms", lambda r, c, p: load(r, c, p)["latencyMs"]["p99"], "%9.2f"),
    ("a2a-go µs", lambda r, c, p: cpu(r, c, p, "go"), "%9.0f"),
    ("a2abus µs", lambda r, c, p: cpu(r, c, p, "bus"), "%9.0f"),
]
def value(f, r, c, p):
    try:
        return f(r, c, p)
    except (OSError, KeyError, TypeError, ZeroDivisionError, ValueError):
        return float("nan")
def check(r, c, p):
    # "ok" when no send failed and a2a-go completed at least the sends
    # load counted (warm-up sends complete there too, uncounted).
    try:
        res = load(r, c, p)
        seen = int(open(os.path.join(bindir, "r%s-c%d-%s.seen" % (r, c, p))).read())
    except (OSError, ValueError, KeyError):
        return "missing", False
    if res.get("failed", 0) != 0:
        return "%s failed %s" % (res.get("failed"), json.dumps(res.get("errors", {}))[:120]), False
    if seen < res["ok"]:
        return "a2a-go completed %d < %d ok" % (seen, res["ok"]), False
    return "ok %d, a2a-go %d" % (res["ok"], seen), True
targets = {"p50": 1.0, "p99": 5.0}
def overhead(rows, c):
    # through − direct of p50 and p99, and whether within target.
    d, t = rows[(c, "direct")], rows[(c, "through")]
    return {"p50": t[1] - d[1], "p99": t[2] - d[2]}
def table(rows, checks=None):
    print("%-4s %-8s" % ("c", "path") + "".join("%10s" % h for h, _, _ in cols) + ("  check" if checks else ""))
    for c in cs:
        for p in paths:
            line = "%-4d %-8s" % (c, p) + "".join(" " + fmt % rows[(c, p)][i] for i, (_, _, fmt) in enumerate(cols))
            print(line + ("  " + checks[(c, p)][0] if checks else ""))
    for c in cs:
        o = overhead(rows, c)
        print("overhead c=%-3d p50 %+7.2f ms (target ≤ %.0f: %s)   p99 %+7.2f ms (target ≤ %.0f: %s)" % (
            c, o["p50"], targets["p50"], "met" if o["p50"] <= targets["p50"] else "MISSED",
            o["p99"], targets["p99"], "met" if o["p99"] <= targets["p99"] else "MISSED"))
if sys.argv[2] == "round":
    r = sys.argv[3]
    rows = {(c, p): [value(f, r, c, p) for _, f, _ in cols] for c in cs for p in paths}
    checks = {(c, p): check(r, c, p) for c in cs for p in paths}
    table(rows, checks)
    sys.exit(0 if all(ok for _, ok in checks.values()) else 3)
rounds = sorted({f.split("-")[0][1:] for f in os.listdir(bindir) if f.startswith("r") and f.endswith(".json")}, key=int)
rows = {(c, p): [statistics.median([value(f, r, c, p) for r in rounds]) for _, f, _ in cols] for c in cs for p in paths}
print("median of %d round(s), %g s measured per run (a2a-go µs, a2abus µs: CPU a task of each process):" % (len(rounds), secs))
table(rows)
# 64 closed-loop clients on a saturated machine wait ≈ 64 / throughput
# (Little's law): what the proxy costs there is its CPU a task, taken
# from the cores a2a-go would otherwise have.
d, t = rows[(64, "direct")][0], rows[(64, "through")][0]
if d and t:
    print("c=64, Little's law: 64/(tasks/s), the mean wait of 64 closed-loop clients: direct %.2f ms, through %.2f ms, %+.2f ms" % (
        64e3 / d, 64e3 / t, 64e3 / t - 64e3 / d))
PY

report() {
	PROXY_SECONDS="$secs" PROXY_WARMUP="$warm" CLK_TCK="$(getconf CLK_TCK)" python3 "$bin/report.py" "$bin" "$@"
}

echo "remote agent binding towards a2a-go: $binding, concurrency $conc; clients send blocking JSON-RPC 1.0; ${secs}s measured after ${warm}s warm-up"
valid=0
for i in $(seq "$rounds"); do
	order=(direct through)
	if [ $((i % 2)) -eq 0 ]; then order=(through direct); fi
	for c in 1 64; do
		for p in "${order[@]}"; do measure "$i" "$p" "$c"; done
	done
	echo "round $i (first of each pair: ${order[0]})"
	report round "$i" || valid=3
	echo
done
report summary
exit "$valid"

#!/usr/bin/env bash
# Whose code a CPU profile of a2abus spends its time in: each sample goes
# to the first frame, from the leaf up, that belongs to an owner — the
# embedded NATS server (nats-server), the NATS client (nats.go), net/http,
# the collector's background work (gc-bg), or a2abus's own packages
# (a2abus:<package>) — so what a2abus's code calls in the standard
# library (encoding/json, the allocator) counts as a2abus's, and what the
# NATS server does on a2abus's behalf counts as the server's. It is the
# split ARCHITECTURE's "Where the time goes" quotes: how much of a task's
# CPU any change to a2abus's own code can reach.
#
#   cmd/a2abus/bench/owners.sh BINARY PROFILE
#   e.g. a2abus serve --pprof 127.0.0.1:9843 --rate-limit 0 --max-unfinished 0 --max-unfinished-bytes 0 &
#        curl -so cpu.prof 'http://127.0.0.1:9843/debug/pprof/profile?seconds=8' &
#        a2abus load --url http://127.0.0.1:8080 --clients 64 --duration 9s
#        cmd/a2abus/bench/owners.sh "$(command -v a2abus)" cpu.prof
set -euo pipefail
if [ $# -ne 2 ]; then sed -n '2,16p' "$0" >&2; exit 2; fi
go tool pprof -raw "$1" "$2" 2>/dev/null | python3 -c '
import re, sys
lines = sys.stdin.read().splitlines()
samples, locs, cur, part = [], {}, None, None
for l in lines:
    if l.startswith("Samples:"):
        part = "samples"; continue
    if l.startswith("Locations"):
        part = "locations"; continue
    if l.startswith("Mappings"):
        part = None; continue
    if part == "samples":
        m = re.match(r"\s+\d+\s+(\d+):((?:\s+\d+)+)\s*$", l)
        if m:
            samples.append((int(m.group(1)), m.group(2).split()))
    elif part == "locations":
        m = re.match(r"\s*(\d+):\s+0x[0-9a-f]+\s+M=\d+\s+(\S+)", l)
        if m:
            cur = m.group(1); locs[cur] = [m.group(2)]; continue
        m = re.match(r"\s+(\S+)\s+\S+:\d+", l)
        if m and cur:
            locs[cur].append(m.group(1))
def owner(f):
    if "nats-server" in f: return "nats-server"
    if "nats%2ego" in f or "nats.go" in f: return "nats.go"
    if "a2abus/a2abus/" in f: return "a2abus:" + f.split("a2abus/a2abus/")[1].split(".")[0]
    if f.startswith("net/http"): return "net/http"
    if f.startswith(("runtime.gcBgMarkWorker", "runtime.bgsweep", "runtime.bgscavenge")): return "gc-bg"
    return None
total, by = 0, {}
for v, ids in samples:
    k = next((o for i in ids for f in locs.get(i, []) for o in [owner(f)] if o), "other")
    by[k] = by.get(k, 0) + v; total += v
if not total:
    sys.exit("no samples: is PROFILE a CPU profile of BINARY?")
for k, v in sorted(by.items(), key=lambda x: -x[1]):
    print("%-22s %5.1f%%" % (k, 100.0 * v / total))
'

#!/usr/bin/env bash
# The capacity model's measurements, in one go on this machine (see
# ARCHITECTURE.md, "Capacity model of the cluster"). Every configuration
# starts from a fresh store and takes compare.sh's main mix: blocking
# sends of the echo agent, 64 clients, `a2abus load --clients 64
# --duration 10s --warmup 2s`:
#
#   serve  one `a2abus serve` (embedded NATS, R1)
#   r1     one `a2abus node` (R1), one `a2abus edge`, one `a2abus worker`
#   r3     three `a2abus node`s clustered (compose.yaml's flags, R3 streams
#          and buckets), one edge and one worker connected to all three
#
# Per configuration and round it reads, before and after the load run:
# each process's CPU (/proc/PID/stat utime+stime), each NATS process's
# disk writes (/proc/PID/io write_bytes), the load generator's own CPU
# (its rusage), what the processes cost idle (2 s without load before
# it), the machine's busy time (/proc/stat: what other users
# took), and every NATS server's counters on its --metrics-listen (the
# a2a_nats_* families: messages and bytes in and out, route bytes,
# JetStream API requests, per stream the last sequence and the leader).
# The readings frame the measured part of the run (they are taken when
# the warm-up ends and when the load generator exits). Tasks are counted
# on the bus: one work item per task, so the work stream's last sequence
# moves by the tasks made between the readings. It prints per round and configuration the per-task figures,
# the median over rounds, and the model's predictions against the
# measurements.
#
#   cmd/a2abus/bench/capacity.sh [rounds] [extra load flags...]   e.g. capacity.sh 2
#
# CAPACITY_SECONDS (measured seconds per run, default 10) and
# CAPACITY_WARMUP (default 2) shorten a smoke run; CAPACITY_CONFIGS
# (default "serve r1 r3") picks configurations; CAPACITY_MODE=stream
# drives streaming sends with 16 clients instead (compare.sh's stream mix).
# Ports 9750-9779 on 127.0.0.1.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
rounds="${1:-2}"; shift || true
secs="${CAPACITY_SECONDS:-10}"
warm="${CAPACITY_WARMUP:-2}"
configs="${CAPACITY_CONFIGS:-serve r1 r3}"
mode="${CAPACITY_MODE:-send}"
tmp="$(mktemp -d)"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
(cd "$root" && go build -o "$tmp/a2abus" ./cmd/a2abus)
"$tmp/a2abus" credentials --dir "$tmp/creds" >/dev/null
a2abus="$tmp/a2abus" creds="$tmp/creds" out="$tmp/out"
mkdir -p "$out"
unlimited=(--rate-limit 0 --max-unfinished 0 --max-unfinished-bytes 0)

wait_url() {
	for _ in $(seq 300); do curl -sf "$1" >/dev/null && return 0; sleep 0.1; done
	echo "no answer from $1" >&2; tail -n 20 "$tmp"/*.log >&2; return 1
}
# run NAME CMD...: starts a process of the configuration in the background;
# its pid is recorded under NAME (the role: serve, node1..3, edge, worker).
declare -A pidof=()
run() { local name="$1"; shift; "$@" >"$tmp/$name.log" 2>&1 & pidof[$name]=$!; pids+=($!); }

# start CONFIG: the configuration's processes, fresh; sets procs (roles)
# and metrics (role=port of each NATS server's metrics listener).
start() {
	rm -rf "$tmp/data"; mkdir -p "$tmp/data"
	pidof=(); procs=(); metrics=()
	case "$1" in
	serve)
		run serve "$a2abus" serve --listen 127.0.0.1:9750 --nats-listen 127.0.0.1:9751 --metrics-listen 127.0.0.1:9752 \
			--data-dir "$tmp/data/serve" "${unlimited[@]}"
		procs=(serve) metrics=(serve=9752) url=http://127.0.0.1:9750
		;;
	r1)
		run node1 "$a2abus" node --nats-listen 127.0.0.1:9753 --metrics-listen 127.0.0.1:9754 --data-dir "$tmp/data/node1" \
			--nats-users "$creds/users.json"
		wait_url http://127.0.0.1:9754/metrics
		NATS_URL=nats://127.0.0.1:9753 run edge "$a2abus" edge --listen 127.0.0.1:9755 --public-url http://127.0.0.1:9755 \
			--default-agent echo --nats-creds "$creds/edge" "${unlimited[@]}"
		NATS_URL=nats://127.0.0.1:9753 run worker "$a2abus" worker --agent echo --nats-creds "$creds/worker"
		procs=(node1 edge worker) metrics=(node1=9754) url=http://127.0.0.1:9755
		;;
	r3)
		local routes=nats://127.0.0.1:9763,nats://127.0.0.1:9764,nats://127.0.0.1:9765 i
		for i in 1 2 3; do
			run "node$i" "$a2abus" node --server-name "nats-$i" --data-dir "$tmp/data/node$i" --nats-listen "127.0.0.1:$((9759 + i))" \
				--cluster-name a2abus --cluster-listen "127.0.0.1:$((9762 + i))" --routes "$routes" \
				--nats-users "$creds/users.json" --cluster-creds "$creds/cluster" --metrics-listen "127.0.0.1:$((9765 + i))"
		done
		for i in 1 2 3; do wait_url "http://127.0.0.1:$((9765 + i))/metrics"; done
		export NATS_URL=nats://127.0.0.1:9760,nats://127.0.0.1:9761,nats://127.0.0.1:9762 A2ABUS_REPLICAS=3
		run edge "$a2abus" edge --listen 127.0.0.1:9769 --public-url http://127.0.0.1:9769 \
			--default-agent echo --nats-creds "$creds/edge" "${unlimited[@]}"
		run worker "$a2abus" worker --agent echo --nats-creds "$creds/worker"
		unset NATS_URL A2ABUS_REPLICAS
		procs=(node1 node2 node3 edge worker) metrics=(node1=9766 node2=9767 node3=9768) url=http://127.0.0.1:9769
		;;
	esac
	wait_url "$url/.well-known/agent-card.json"
}
stop() { kill "${pidof[@]}" 2>/dev/null || true; wait "${pidof[@]}" 2>/dev/null || true; pids=(); }

# snap FILE: one reading of everything, as lines "key value" (python
# reads two and subtracts).
snap() {
	{
		echo "time $(date +%s.%N)"
		awk '/^cpu / {print "box_busy", $2 + $3 + $4 + $7 + $8 + $9; print "box_all", $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat
		local p
		for p in "${procs[@]}"; do
			awk -v p="$p" '{print "cpu_" p, $14 + $15; print "sys_" p, $15}' "/proc/${pidof[$p]}/stat"
			awk -v p="$p" '$1 == "write_bytes:" {print "disk_" p, $2}' "/proc/${pidof[$p]}/io"
		done
		local m
		for m in "${metrics[@]}"; do
			curl -sf "http://127.0.0.1:${m#*=}/metrics" | awk -v p="${m%%=*}" '/^a2a_nats_/ {print p "|" $1, $2}'
		done
	} >"$1"
}

# measure ROUND CONFIG: one fresh configuration, one load run. The
# readings frame the measured part of the run (after the warm-up), so
# start-up and warm-up transients stay out of the per-task figures.
measure() {
	local f="$out/r$1-$2" loadflags=(--clients 64) lpid
	[ "$mode" = stream ] && loadflags=(--clients 16 --mode stream)
	start "$2"
	sleep 1 # leaders elected, consumers made: the start-up's own writes are done
	# What the processes cost without load (heartbeats, Raft, timers).
	snap "$f.idle0"; sleep 2; snap "$f.idle1"
	# The load generator's CPU is its rusage, read by the parent that reaps it.
	python3 -c 'import os, subprocess, sys
p = subprocess.Popen(sys.argv[2:], stdout=open(sys.argv[1], "w"))
_, st, ru = os.wait4(p.pid, 0)
print("cpu_load", (ru.ru_utime + ru.ru_stime) * float(os.sysconf("SC_CLK_TCK")))
sys.exit(os.waitstatus_to_exitcode(st))' "$f.json" "$a2abus" load --url "$url" --duration "${secs}s" --warmup "${warm}s" -o json \
		"${loadflags[@]}" "${extra[@]}" >"$f.load" &
	lpid=$!
	sleep "$warm"
	snap "$f.before"
	wait "$lpid" || echo '{"ok": 0, "failed": -1, "perSecond": 0}' >"$f.json"
	snap "$f.after"
	echo "procs ${procs[*]}" >"$f.procs"
	stop
}

extra=("$@")
for i in $(seq "$rounds"); do
	for c in $configs; do measure "$i" "$c"; done
	CAP_ROUND="$i" python3 "$root/cmd/a2abus/bench/capacity.py" "$out" "$configs" "$secs" "$warm"
done
CAP_ROUND=summary python3 "$root/cmd/a2abus/bench/capacity.py" "$out" "$configs" "$secs" "$warm"
echo "machine: $(nproc) cores, $(uptime)"

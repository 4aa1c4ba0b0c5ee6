"""The report of capacity.sh: per-task figures of each configuration, and
the capacity model's predictions against the measurements.

    capacity.py OUTDIR "CONFIGS" SECONDS WARMUP   (CAP_ROUND=N or summary)

Reads OUTDIR/rROUND-CONFIG.{before,after,json,load,procs}, written by
capacity.sh. See ARCHITECTURE.md, "Capacity model of the cluster".
"""
import json
import os
import re
import statistics
import sys

outdir, configs = sys.argv[1], sys.argv[2].split()
secs, warm = float(sys.argv[3]), float(sys.argv[4])
tck = float(os.sysconf("SC_CLK_TCK"))
which = os.environ.get("CAP_ROUND", "summary")


def readings(path):
    out = {}
    for line in open(path):
        k, _, v = line.rstrip("\n").rpartition(" ")
        try:
            out[k] = float(v)
        except ValueError:
            pass
    return out


def node_series(r, node, name):
    """{stream or "": value} of the a2a_nats family name on node."""
    out = {}
    pat = re.compile(r'^%s\|%s(?:\{stream="([^"]*)"\})?$' % (re.escape(node), re.escape(name)))
    for k, v in r.items():
        m = pat.match(k)
        if m:
            out[m.group(1) or ""] = v
    return out


def one(rnd, cfg):
    """The per-task figures of one configuration's run, or None."""
    base = os.path.join(outdir, "r%s-%s" % (rnd, cfg))
    if not os.path.exists(base + ".after"):
        return None
    b, a = readings(base + ".before"), readings(base + ".after")
    procs = open(base + ".procs").read().split()[1:]
    load = json.load(open(base + ".json"))
    lcpu = readings(base + ".load").get("cpu_load", float("nan"))
    nodes = [p for p in procs if p.startswith("node") or p == "serve"]
    d = lambda k: a.get(k, 0) - b.get(k, 0)
    ser = lambda node, name, r: node_series(r, node, name)
    # Tasks: the work stream's last sequence moved by one per task, on
    # every member that holds it (the highest, should one lag).
    tasks = max(ser(n, "a2a_nats_stream_last_seq", a).get("A2A_WORK", 0) -
                ser(n, "a2a_nats_stream_last_seq", b).get("A2A_WORK", 0) for n in nodes)
    el = d("time")
    if tasks <= 0:
        return {"broken": True, "load": load}
    us = lambda ticks: ticks / tck * 1e6 / tasks
    # The load generator's rusage covers its whole run, warm-up included:
    # per task over the tasks it made, then its share of the readings' frame.
    made = load["perSecond"] * (secs + warm)
    lus = lcpu / tck * 1e6 / made if made else float("nan")
    f = {"tasks": tasks, "elapsed": el, "load": load, "procs": procs, "nodes": nodes,
         "rate": tasks / el, "cpu": {p: us(d("cpu_" + p)) for p in procs}, "sys": {p: us(d("sys_" + p)) for p in procs},
         "loadgen": lus}
    ours = sum(d("cpu_" + p) for p in procs) + lus * tasks * tck / 1e6
    i0, i1 = readings(base + ".idle0"), readings(base + ".idle1")
    f["idle_cpu"] = {p: (i1.get("cpu_" + p, 0) - i0.get("cpu_" + p, 0)) / tck / (i1["time"] - i0["time"]) for p in procs}
    f["others_cores"] = max(d("box_busy") - ours, 0) / tck / el
    f["box_cores"] = d("box_all") / tck / el
    f["idle_cores"] = (d("box_all") - d("box_busy")) / tck / el
    f["disk"] = {n: d("disk_" + n) / tasks for n in nodes}
    per = {}
    for n in nodes:
        g = lambda name: ser(n, name, a).get("", 0) - ser(n, name, b).get("", 0)
        per[n] = {"in_msgs": g("a2a_nats_in_msgs_total") / tasks, "out_msgs": g("a2a_nats_out_msgs_total") / tasks,
                  "in_bytes": g("a2a_nats_in_bytes_total") / tasks, "out_bytes": g("a2a_nats_out_bytes_total") / tasks,
                  "route_in": g("a2a_nats_route_in_bytes_total") / tasks, "route_out": g("a2a_nats_route_out_bytes_total") / tasks,
                  "api": g("a2a_nats_jetstream_api_requests_total") / tasks}
    f["per_node"] = per
    streams, leaders = {}, {}
    for n in nodes:
        la, lb = ser(n, "a2a_nats_stream_last_seq", a), ser(n, "a2a_nats_stream_last_seq", b)
        for s, v in la.items():
            streams[s] = max(streams.get(s, 0), (v - lb.get(s, 0)) / tasks)
        for s, v in ser(n, "a2a_nats_stream_leader", a).items():
            if v == 1:
                leaders[s] = n
    f["streams"] = {s: v for s, v in streams.items() if v > 0}
    f["leaders"] = leaders
    return f


def rounds():
    return sorted({f.split("-")[0][1:] for f in os.listdir(outdir) if f.endswith(".after")}, key=int)


def predict(f, roles_us):
    """tasks/s the box gives when CPU bounds it: the cores left by other
    users over the per-task CPU of every process of the run (load
    generator included)."""
    return (f["box_cores"] - f["others_cores"]) * 1e6 / roles_us


def show(rs, label):
    runs = {c: [x for x in (one(r, c) for r in rs) if x and not x.get("broken")] for c in configs}
    med = lambda xs: statistics.median(xs) if xs else float("nan")
    M = lambda c, get: med([get(f) for f in runs[c]])
    print("== %s: %s, %d clients %s; %s measured + %s warm-up s a run ==" %
          (label, "round " + rs[0] if len(rs) == 1 else "median of %d rounds" % len(rs),
           64 if os.environ.get("CAPACITY_MODE", "send") == "send" else 16, os.environ.get("CAPACITY_MODE", "send"), secs, warm))
    for c in configs:
        if not runs[c]:
            print("%s: no run (broken or missing)" % c)
            continue
        f0 = runs[c][0]
        print("\n[%s] tasks/s %.0f (load: %.0f/s, p50 %.2f ms, p99 %.2f ms, failed %d); tasks counted %d" %
              (c, M(c, lambda f: f["rate"]), M(c, lambda f: f["load"]["perSecond"]),
               M(c, lambda f: f["load"]["latencyMs"]["p50"]), M(c, lambda f: f["load"]["latencyMs"]["p99"]),
               sum(f["load"].get("failed", 0) for f in runs[c]), M(c, lambda f: f["tasks"])))
        print("  core-µs per task (of which system): " + "  ".join("%s %.0f (%.0f)" % (p, M(c, lambda f, p=p: f["cpu"][p]), M(c, lambda f, p=p: f["sys"][p])) for p in f0["procs"]) +
              "  | load generator %.0f | sum of servers %.0f" % (M(c, lambda f: f["loadgen"]), M(c, lambda f: sum(f["cpu"].values()))))
        print("  without load, cores busy: " + "  ".join("%s %.3f" % (p, M(c, lambda f, p=p: f["idle_cpu"][p])) for p in f0["procs"]) +
              "  (at this rate, per task: %.0f µs in all)" % M(c, lambda f: sum(f["idle_cpu"].values()) * 1e6 / f["rate"]))
        print("  box: %.2f cores, other users %.2f, idle %.2f; readings %.2f s apart" %
              (M(c, lambda f: f["box_cores"]), M(c, lambda f: f["others_cores"]), M(c, lambda f: f["idle_cores"]), M(c, lambda f: f["elapsed"])))
        print("  %-6s %9s %9s %9s %10s %10s %10s %10s %7s" % ("nats", "disk B", "in msgs", "out msgs", "in B", "out B", "route in B", "route outB", "API"))
        for n in f0["nodes"]:
            g = lambda k, n=n: M(c, lambda f: f["per_node"][n][k])
            print("  %-6s %9.0f %9.2f %9.2f %10.0f %10.0f %10.0f %10.0f %7.2f" %
                  (n, M(c, lambda f, n=n: f["disk"][n]), g("in_msgs"), g("out_msgs"), g("in_bytes"), g("out_bytes"),
                   g("route_in"), g("route_out"), g("api")))
        st = sorted(f0["streams"])
        print("  stored messages per task: " + "  ".join("%s %.2f" % (s, M(c, lambda f, s=s: f["streams"].get(s, 0))) for s in st) +
              "  | all %.2f" % M(c, lambda f: sum(f["streams"].values())))
        if len(f0["nodes"]) > 1:
            for f in runs[c]:
                lead = {}
                for s, n in sorted(f["leaders"].items()):
                    lead.setdefault(n, []).append(s + ("*" if s in f["streams"] else ""))
                print("  leaders (* written per task): " + "; ".join("%s: %s" % (n, " ".join(v)) for n, v in sorted(lead.items())))
    # The model against the measurements.
    print("\nmodel check (tasks/s = cores left by other users x 1e6 / core-µs per task of every process, load generator included):")
    role = lambda c, p: M(c, lambda f: f["cpu"].get(p, float("nan")))
    rows = []
    for c in configs:
        if runs[c]:
            own = M(c, lambda f: predict(f, sum(f["cpu"].values()) + f["loadgen"]))
            rows.append(("%s from its own processes" % c, own, M(c, lambda f: f["rate"])))
    if runs.get("r1") and runs.get("serve"):
        e, w, n1 = role("r1", "edge"), role("r1", "worker"), role("r1", "node1")
        print("  serve from r1's roles: edge %.0f + worker %.0f + node %.0f = %.0f core-µs (serve measured %.0f)" %
              (e, w, n1, e + w + n1, role("serve", "serve")))
        rows.append(("serve from r1's roles", M("serve", lambda f: predict(f, e + w + n1 + f["loadgen"])), M("serve", lambda f: f["rate"])))
    if runs.get("r1") and runs.get("r3"):
        e, w = role("r1", "edge"), role("r1", "worker")
        nodes = M("r3", lambda f: sum(f["cpu"][n] for n in f["nodes"]))
        print("  r3 from r1's edge and worker + r3's nodes: %.0f + %.0f + %.0f = %.0f core-µs" % (e, w, nodes, e + w + nodes))
        rows.append(("r3 from r1's edge, worker", M("r3", lambda f: predict(f, e + w + sum(f["cpu"][n] for n in f["nodes"]) + f["loadgen"])),
                     M("r3", lambda f: f["rate"])))
    for name, p, m in rows:
        print("  %-30s predicted %7.0f  measured %7.0f  measured/predicted %.2f%s" %
              (name, p, m, m / p, "" if abs(m / p - 1) <= 0.25 else "  OUTSIDE ±25%"))
    if runs.get("r3") and runs.get("r1"):
        e, w = role("r1", "edge"), role("r1", "worker")
        n3 = M("r3", lambda f: sum(f["cpu"][n] for n in f["nodes"]))
        busiest = M("r3", lambda f: max(f["cpu"][n] for n in f["nodes"]))
        print("\nworked example (tasks/s = min over roles of instances x cores x 1e6 / core-µs of the role; edge %.0f, worker %.0f,"
              " R3 NATS %.0f in all, busiest node %.0f):" % (e, w, n3, busiest))
        print("  %-22s %8s %8s %8s" % ("edges, workers, nodes", "2 cores", "4 cores", "8 cores"))
        for ne, nw, k in [(1, 1, 3), (2, 2, 3), (4, 4, 3), (2, 2, 5), (4, 4, 5), (8, 8, 5)]:
            print("  %-22s %8.0f %8.0f %8.0f" % ("%d, %d, %d" % (ne, nw, k), *(
                min(ne * cores * 1e6 / e, nw * cores * 1e6 / w, cores * 1e6 / nats_node(k, n3, busiest)) for cores in (2, 4, 8))))


# The hot streams a blocking task writes: the intake, the work stream, the
# events and the task bucket. R3 puts HOT x 3 replicas on the nodes.
HOT = 4


def nats_node(k, total, busiest):
    """core-µs per task of the busiest of k nodes: the replicas of the hot
    streams spread as evenly as they go (ceil(HOT x 3 / k) of them on the
    busiest), times the leader imbalance measured on 3 nodes (busiest over
    the mean), with every replica costing total / (HOT x 3)."""
    imbalance = busiest / (total / 3)
    return -(-HOT * 3 // k) * total / (HOT * 3) * imbalance

rs = rounds()
if which == "summary":
    show(rs, "summary")
else:
    show([which], "round")
print()

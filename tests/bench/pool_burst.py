#!/usr/bin/python3
"""A burst of creates against the adaptive warm pool (issue 17), with a fixed
pool as the baseline of the same run.

For each variant (fixed: --pool-size 4 --pool-max 0; adaptive: --pool-size 4
--pool-max 64 --pool-memory-mb 1024) a warm-up burst of N concurrent clients,
each creating a session and running print(1), then a wait for the pool to
settle (the adaptive one refills to its new target), then the measured burst
of the same shape: the time until all N first results are in, and each
client's create + first exec p50/p99. Then what the grown pool costs idle:
its sandboxes, host memory (MemAvailable before it grew and after), and the
daemon's CPU over 10 idle seconds.

    tests/bench/pool_burst.py [--burst 50] [--json FILE]

Target: the adaptive pool's burst within 1 s. It starts its own Redis and
daemons (CITEST_DAEMON, default build/ci-daemon) and removes what it made."""
import argparse
import concurrent.futures as cf
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
import bench  # noqa: E402  (cgroup_memory, shim_pss_kb: as bench_capacity.py)
from harness import Client, Daemon, RedisServer, percentile, wait_for  # noqa: E402


def mem_available_kb():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1])
    return 0


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def one_client(port):
    t0 = time.perf_counter()
    c = Client(port, timeout=120)
    status, s = c.request("POST", "/v1/sessions", body={})
    assert status == 201, (status, s)
    r = c.exec(s["id"], "print(1)")
    assert r["stdout"] == "1\n", r
    return s["id"], time.perf_counter() - t0


def run_burst(d, n):
    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(n) as ex:
        results = list(ex.map(lambda _: one_client(d.port), range(n)))
    total = time.perf_counter() - t0
    ids = [sid for sid, _ in results]
    times = [t * 1000.0 for _, t in results]
    return ids, total, times


def delete_all(d, ids):
    with cf.ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda sid: d.api.delete(sid), ids))


def variant(redis, tmp, name, args, n):
    d = Daemon(redis, tmp, ("--log-level", "warn", *args),
               binary=os.environ.get("CITEST_DAEMON", "build/ci-daemon"))
    try:
        wait_for(lambda: d.metric("ci_pool_size") >= 4, 120, interval=0.1, what="a pool of 4")
        mem0 = mem_available_kb()
        ids, warm_total, _ = run_burst(d, n)
        delete_all(d, ids)
        t0 = time.perf_counter()
        target = int(d.metric("ci_pool_target"))
        wait_for(lambda: d.metric("ci_pool_size") >= target, 300, interval=0.1,
                 what="%s: the pool at its target %d" % (name, target))
        refill_s = time.perf_counter() - t0
        wait_for(lambda: len(d.containers(all_states=True)) == target, 120, interval=0.2,
                 what="%s: only the pool's containers left" % name)
        mem1 = mem_available_kb()
        per = []
        for cid in d.containers():
            cg, shim = bench.cgroup_memory(cid), bench.shim_pss_kb(cid)
            if cg:
                per.append(cg[0] / 1048576.0 + (shim or 0) / 1024.0)
        ticks0, t_idle = cpu_ticks(d.proc.pid), time.perf_counter()
        time.sleep(10)
        idle_cpu = (cpu_ticks(d.proc.pid) - ticks0) / os.sysconf("SC_CLK_TCK") / (
            time.perf_counter() - t_idle)
        hits0 = d.metric("ci_pool_hits_total")
        ids, total, times = run_burst(d, n)
        hits = d.metric("ci_pool_hits_total") - hits0
        delete_all(d, ids)
        return {"variant": name, "burst": n, "warmup_s": warm_total, "target": target,
                "refill_s": refill_s, "all_first_results_s": total,
                "p50_ms": percentile(times, 50), "p99_ms": percentile(times, 99),
                "hits": hits, "pool_ready": target,
                "idle_mem_mb": (mem0 - mem1) / 1024.0, "idle_daemon_cpu": idle_cpu,
                "pool_cgroup_mb": sum(per), "per_sandbox_mb": sum(per) / len(per) if per else 0}
    finally:
        d.stop()
        d.cleanup()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--burst", type=int, default=50)
    ap.add_argument("--json")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="cibench-")
    redis = RedisServer(tmp)
    rows = []
    try:
        rows.append(variant(redis, tmp, "fixed pool of 4",
                            ("--pool-size", "4", "--pool-max", "0"), args.burst))
        rows.append(variant(redis, tmp, "adaptive (pool-max 64)",
                            ("--pool-size", "4", "--pool-max", "64", "--pool-memory-mb", "1024"),
                            args.burst))
    finally:
        redis.stop()
    base = rows[0]
    print("a burst of %d clients (create + print(1)), after a warm-up burst of the same shape:"
          % args.burst)
    print("%-24s %7s %9s %11s %9s %9s %5s %10s %10s %9s" % (
        "variant", "target", "refill s", "all done s", "p50 ms", "p99 ms", "hits",
        "pool MiB", "MiB each", "idle CPU"))
    for r in rows:
        r["ratio_all_done"] = r["all_first_results_s"] / base["all_first_results_s"]
        print("%-24s %7d %9.1f %11.2f %9.0f %9.0f %5d %10.0f %10.1f %8.1f%%" % (
            r["variant"], r["target"], r["refill_s"], r["all_first_results_s"], r["p50_ms"],
            r["p99_ms"], r["hits"], r["pool_cgroup_mb"], r["per_sandbox_mb"],
            r["idle_daemon_cpu"] * 100))
    print("(pool MiB: the warm sandboxes' cgroups and shims, idle; MemAvailable fell by "
          "%s MiB as the pools grew, which other work on the machine blurs)"
          % " and ".join("%.0f" % r["idle_mem_mb"] for r in rows))
    print("adaptive / fixed, time to all first results: %.2fx" % rows[1]["ratio_all_done"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()

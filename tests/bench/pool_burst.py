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

A create the daemon refuses or answers late (a 503 when a sandbox was not
ready within --start-timeout-s on a busy machine) is counted and reported
beside the variant ("48 of 50 ready, 2 refused: ..."), not raised; a variant
that cannot be measured at all is a "failed" row and the exit status is 1.

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
from stepnote import note  # noqa: E402


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
    """One client: create, then print(1). (session id or None, seconds, why
    not): a refused or late create (a 503 when the sandbox was not ready in
    --start-timeout-s, say) is a result of the burst, counted, not a crash."""
    t0 = time.perf_counter()
    c = Client(port, timeout=120)
    sid = None
    try:
        status, s = c.request("POST", "/v1/sessions", body={})
        if status != 201:
            why = s.get("error", {}).get("message") if isinstance(s, dict) else None
            return None, time.perf_counter() - t0, "%d %s" % (status, why or str(s)[:200])
        sid = s["id"]
        r = c.exec(sid, "print(1)")
        if r.get("stdout") != "1\n":
            return sid, time.perf_counter() - t0, "print(1) gave %r" % (r,)
        return sid, time.perf_counter() - t0, None
    except Exception as e:  # noqa: BLE001 - counted as that client's result
        return sid, time.perf_counter() - t0, "%s: %s" % (type(e).__name__, str(e)[:200])


def run_burst(d, n):
    """(ids to delete, seconds until every client was done, the good clients'
    ms, the reasons of the others)."""
    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(n) as ex:
        results = list(ex.map(lambda _: one_client(d.port), range(n)))
    total = time.perf_counter() - t0
    ids = [sid for sid, _, _ in results if sid]
    times = [t * 1000.0 for _, t, why in results if why is None]
    refused = [why for _, _, why in results if why is not None]
    return ids, total, times, refused


def delete_all(d, ids):
    with cf.ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda sid: d.api.delete(sid), ids))


def refusals(whys):
    """'K refused: the first reason' (the most common one first)."""
    if not whys:
        return ""
    common = max(set(whys), key=whys.count)
    return "%d refused: %s" % (len(whys), common)


def variant(redis, tmp, name, args, n):
    """The variant's row; a step that could not be measured (the pool never
    filled, say) is a row with "failed" and its reason, not a crash."""
    r = {"variant": name, "burst": n}
    d = None
    try:
        d = Daemon(redis, tmp, ("--log-level", "warn", *args),
                   binary=os.environ.get("CITEST_DAEMON", "build/ci-daemon"))
        wait_for(lambda: d.metric("ci_pool_size") >= 4, 120, interval=0.1, what="a pool of 4")
        mem0 = mem_available_kb()
        ids, warm_total, _, warm_refused = run_burst(d, n)
        delete_all(d, ids)
        r.update(warmup_s=warm_total, warmup_refused=len(warm_refused),
                 warmup_refusals=refusals(warm_refused))
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
        time.sleep(10)  # deliberate: the daemon's CPU over 10 idle seconds
        idle_cpu = (cpu_ticks(d.proc.pid) - ticks0) / os.sysconf("SC_CLK_TCK") / (
            time.perf_counter() - t_idle)
        hits0 = d.metric("ci_pool_hits_total")
        ids, total, times, refused = run_burst(d, n)
        hits = d.metric("ci_pool_hits_total") - hits0
        delete_all(d, ids)
        r.update(target=target, refill_s=refill_s, all_first_results_s=total,
                 ready=len(times), refused=len(refused), refusals=refusals(refused),
                 p50_ms=percentile(times, 50) if times else None,
                 p99_ms=percentile(times, 99) if times else None,
                 hits=hits, pool_ready=target, idle_mem_mb=(mem0 - mem1) / 1024.0,
                 idle_daemon_cpu=idle_cpu, pool_cgroup_mb=sum(per),
                 per_sandbox_mb=sum(per) / len(per) if per else 0)
    except Exception as e:  # noqa: BLE001 - the row says it
        r["failed"] = "%s: %s" % (type(e).__name__, (str(e).strip().splitlines() or [""])[0][:300])
    finally:
        if d is not None:
            try:
                d.stop()
            finally:
                d.cleanup()
    return r


def ms(v):
    return "%9.0f" % v if v is not None else "%9s" % "-"


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
    print("a burst of %d clients (create + print(1)), after a warm-up burst of the same shape:"
          % args.burst)
    print("%-24s %7s %9s %11s %9s %9s %5s %10s %10s %9s  %s" % (
        "variant", "target", "refill s", "all done s", "p50 ms", "p99 ms", "hits",
        "pool MiB", "MiB each", "idle CPU", "ready"))
    for r in rows:
        if "failed" in r:
            print("%-24s failed: %s" % (r["variant"], r["failed"]))
            continue
        print("%-24s %7d %9.1f %11.2f %s %s %5d %10.0f %10.1f %8.1f%%  %d of %d%s" % (
            r["variant"], r["target"], r["refill_s"], r["all_first_results_s"], ms(r["p50_ms"]),
            ms(r["p99_ms"]), r["hits"], r["pool_cgroup_mb"], r["per_sandbox_mb"],
            r["idle_daemon_cpu"] * 100, r["ready"], r["burst"],
            ", " + r["refusals"] if r["refused"] else ""))
        if r["warmup_refused"]:
            print("%-24s (warm-up burst: %s)" % ("", r["warmup_refusals"]))
    measured = [r for r in rows if "failed" not in r]
    if measured:
        print("(pool MiB: the warm sandboxes' cgroups and shims, idle; MemAvailable fell by "
              "%s MiB as the pools grew, which other work on the machine blurs)"
              % " and ".join("%.0f" % r["idle_mem_mb"] for r in measured))
    if len(measured) == 2 and all(r["ready"] for r in measured):
        for r in measured:
            r["ratio_all_done"] = r["all_first_results_s"] / measured[0]["all_first_results_s"]
        print("adaptive / fixed, time to all first results: %.2fx" % rows[1]["ratio_all_done"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows}, f, indent=2)
    parts = []
    for r in rows:
        short = r["variant"].split(" ")[0]
        if "failed" in r:
            parts.append("%s: failed: %s" % (short, r["failed"]))
        else:
            parts.append("%s: %d of %d ready%s" % (short, r["ready"], r["burst"],
                                                    ", " + r["refusals"] if r["refused"] else ""))
    if len(measured) == 2 and "ratio_all_done" in measured[1]:
        parts.append("adaptive / fixed %.2fx" % measured[1]["ratio_all_done"])
    note("; ".join(parts))
    # Refused creates are a result; a variant that could not be measured is not.
    return 1 if len(measured) < len(rows) else 0


if __name__ == "__main__":
    sys.exit(main())

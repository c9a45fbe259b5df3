#!/usr/bin/python3
"""The benchmark harness of issue 6: every row measured in one run, baselines
included, with ratios against them.

Prints ONE table at the end and writes it to build/bench/results.md (markdown)
and build/bench/results.json. Started by tests/bench/run.sh (`make bench`).

Rows (see docs/performance.md for what bounds each):
  1  session create p50/p99, cold (--pool-size 0) and from the warm pool
  2  create → first result of print(1): sequential, staggered, burst; cold and pool
  3  exec round trip, print(1), one session, HTTP keep-alive
  4  throughput: trivial execs/s over S concurrent sessions (tests/bench/loadgen.c)
  5  density: memory per idle session (host, cgroup, daemon RSS, shim), and
     exec latency with K idle sessions present
  6  exec latency while cold creates are in flight
  7  baseline: docker run --rm per execution
  8  baseline: a Docker exec per execution (Engine API, and the CLI)
  9  baseline: a local Jupyter kernel round trip
  10 idle expiry lateness: how long after its expires_at a session is gone
     (the precision the chaos suite used to bound; it checks "not early")

Everything it starts (Redis, daemons, a Jupyter kernel, baseline containers)
is stopped by pid or removed by label at the end, even on failure. Traffic
goes only to loopback, the Docker socket and the run's own containers.

Iteration counts: BENCH_QUICK=1 for a ~2-minute run; every count can be set
with its own environment variable (see CONFIG below).
"""
import concurrent.futures as cf
import datetime
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, HERE)
import exec_rtt  # noqa: E402
from harness import Client, Daemon, RedisServer, image_tag, percentile, wait_for  # noqa: E402
from harness.measure import expiry_lateness  # noqa: E402
from stepnote import note  # noqa: E402

QUICK = os.environ.get("BENCH_QUICK", "") not in ("", "0")


def env_int(name, full, quick):
    v = os.environ.get(name)
    if v:
        return int(v)
    return quick if QUICK else full


def env_float(name, full, quick):
    v = os.environ.get(name)
    if v:
        return float(v)
    return quick if QUICK else full


CONFIG = {
    "quick": QUICK,
    "create_n": env_int("BENCH_CREATE_N", 30, 8),                # row 1, per mode
    "tti_n": env_int("BENCH_TTI_N", 10, 5),                      # row 2 sequential
    "stagger_n": env_int("BENCH_STAGGER_N", 10, 10),             # row 2 staggered
    "stagger_ms": env_int("BENCH_STAGGER_MS", 200, 200),
    "burst_n": env_int("BENCH_BURST_N", 50, 20),                 # row 2 burst
    "rtt_n": env_int("BENCH_RTT_N", 3000, 1000),                 # row 3
    "tput_sessions": env_int("BENCH_TPUT_SESSIONS", 50, 20),     # row 4
    "tput_seconds": env_float("BENCH_TPUT_SECONDS", 10, 5),
    "density_k": env_int("BENCH_DENSITY_K", 50, 20),             # row 5
    "density_exec_n": env_int("BENCH_DENSITY_EXEC_N", 1000, 500),
    "contention_creates": env_int("BENCH_CONTENTION_CREATES", 10, 10),  # row 6
    "expiry_n": env_int("BENCH_EXPIRY_N", 20, 10),               # row 10
    "docker_run_n": env_int("BENCH_DOCKER_RUN_N", 10, 5),        # row 7
    "docker_exec_n": env_int("BENCH_DOCKER_EXEC_N", 20, 10),     # row 8
    "jupyter_n": env_int("BENCH_JUPYTER_N", 500, 200),           # row 9
    "pool_size": env_int("BENCH_POOL_SIZE", 4, 4),
    "pool_refill_timeout_s": env_float("BENCH_POOL_REFILL_TIMEOUT_S", 60, 60),
    "create_parallel": env_int("BENCH_CREATE_PARALLEL", 4, 4),   # set-up/teardown fan-out
    "image": os.environ.get("BENCH_IMAGE") or image_tag(),  # the daemon's (CID_IMAGES)
    "mem_budget_gb": env_float("BENCH_MEM_BUDGET_GB", 24, 24),
}

OUT_DIR = os.environ.get("BENCH_OUT", os.path.join(ROOT, "build", "bench"))
LOADGEN = os.environ.get("BENCH_LOADGEN", os.path.join(OUT_DIR, "loadgen"))
INFLIGHT = os.path.join(OUT_DIR, ".inflight")
RUN_ID = os.environ.get("BENCH_RUN_ID") or uuid.uuid4().hex[:10]
BENCH_LABEL = "ci.bench=%s" % RUN_ID
HTTP_TIMEOUT = 180


def log(msg):
    sys.stderr.write("[bench %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def inflight(kind, value):
    """Note a resource so run.sh can remove it if this process is killed."""
    with open(INFLIGHT, "a") as f:
        f.write("%s %s\n" % (kind, value))


def pct(xs, p):
    return percentile(xs, p) if xs else None


def summary(xs):
    return {"n": len(xs), "p50_ms": pct(xs, 50), "p99_ms": pct(xs, 99),
            "mean_ms": (sum(xs) / len(xs)) if xs else None, "max_ms": max(xs) if xs else None}


# ---------------------------------------------------------------- results

ROWS = []


def row(rid, name, n=None, p50=None, p99=None, value=None, note="", **extra):
    r = {"row": rid, "name": name, "n": n, "p50_ms": p50, "p99_ms": p99, "value": value,
         "note": note}
    r.update(extra)
    ROWS.append(r)
    log("row %s %s: n=%s p50=%s p99=%s value=%s %s" % (rid, name, n, fmt_ms(p50), fmt_ms(p99),
                                                        value, note))
    return r


def row_failed(rid, name, why):
    return row(rid, name, value="failed", note=why, failed=True)


def row_na(rid, name, why):
    return row(rid, name, value="n/a", note=why, na=True)


def find(rid):
    for r in ROWS:
        if r["row"] == rid and not r.get("failed") and not r.get("na"):
            return r
    return None


def fmt_ms(v):
    if v is None:
        return ""
    if v < 1:
        return "%.3f ms" % v
    if v < 100:
        return "%.1f ms" % v
    return "%.0f ms" % v


# ---------------------------------------------------------------- HTTP helpers

def connect(port):
    """One keep-alive connection to the daemon (the harness's client)."""
    return Client(port, timeout=HTTP_TIMEOUT).keep_alive()


def create_session(port, client=None):
    c = client or connect(port)
    try:
        r = c.send("POST", "/v1/sessions", body={})
        status, payload = r.status, r.body
        if status != 201:
            raise RuntimeError("create: %d %s" % (status, payload[:300]))
        return json.loads(payload)["id"]
    finally:
        if client is None:
            c.close()


def exec_print1(client, sid):
    r = client.send("POST", "/v1/sessions/%s/exec" % sid, body={"code": "print(1)"})
    status, payload = r.status, r.body
    if status != 200 or b'"stdout":"1\\n"' not in payload:
        raise RuntimeError("exec: %d %s" % (status, payload[:300]))


def delete_sessions(daemon, ids):
    def one(sid):
        try:
            return daemon.api.delete(sid)
        except Exception as e:  # noqa: BLE001 - cleanup continues
            return str(e)
    with cf.ThreadPoolExecutor(CONFIG["create_parallel"] * 2) as ex:
        list(ex.map(one, ids))


def create_many(port, k):
    """k sessions, created CONFIG['create_parallel'] at a time (set-up, not timed)."""
    with cf.ThreadPoolExecutor(CONFIG["create_parallel"]) as ex:
        futs = [ex.submit(create_session, port) for _ in range(k)]
        ids, errors = [], []
        for f in futs:
            try:
                ids.append(f.result())
            except Exception as e:  # noqa: BLE001
                errors.append(str(e))
    return ids, errors


def metrics(port):
    return Client(port, timeout=HTTP_TIMEOUT).metrics()


# ---------------------------------------------------------------- daemons

class BenchDaemon(Daemon):
    """The harness's Daemon, noting itself for run.sh and never left running
    when its start fails."""

    def start(self):
        inflight("label", "ci.prefix=%s" % self.prefix)
        inflight("dir", self.state_dir)
        try:
            super().start()
        finally:
            if self.proc is not None:
                inflight("pid", self.proc.pid)
        # A start that raised leaves self.proc possibly running: the caller
        # stops it through stop_daemon().


def start_daemon(redis, tmp, extra):
    """A started daemon, or (None, why)."""
    holder = {}

    class Tracked(BenchDaemon):
        def start(self):
            holder["d"] = self
            super().start()

    try:
        d = Tracked(redis, tmp, ("--log-level", "warn") + tuple(extra))
        return d, None
    except BaseException as e:  # noqa: BLE001 - includes a readiness timeout
        d = holder.get("d")
        why = str(e).strip().splitlines()
        if d is not None:
            stop_daemon(d)
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        return None, " ".join(why[:3])[:300]


def stop_daemon(d):
    try:
        d.stop()
    finally:
        d.cleanup()


def pool_size_now(port):
    return metrics(port).get("ci_pool_size")


def wait_pool_full(port, want, timeout):
    try:
        wait_for(lambda: (pool_size_now(port) or 0) >= want, timeout, interval=0.05,
                          what="the warm pool to refill")
        return True
    except AssertionError:
        return False


# ---------------------------------------------------------------- row 1 and 2

def measure_creates(d, n, pool_want=None):
    """n creates, each deleted (not timed). With pool_want, wait for a full pool
    first and count whether each create was a pool hit."""
    times, hits, misses, errors = [], 0, 0, []
    for _ in range(n):
        if pool_want and not wait_pool_full(d.port, pool_want, CONFIG["pool_refill_timeout_s"]):
            errors.append("pool did not refill within %.0fs" % CONFIG["pool_refill_timeout_s"])
            break
        before = metrics(d.port) if pool_want else {}
        t0 = time.perf_counter()
        try:
            sid = create_session(d.port)
        except Exception as e:  # noqa: BLE001
            errors.append(str(e))
            continue
        times.append((time.perf_counter() - t0) * 1000.0)
        if pool_want:
            after = metrics(d.port)
            if after.get("ci_pool_hits_total", 0) > before.get("ci_pool_hits_total", 0):
                hits += 1
            else:
                misses += 1
        d.api.delete(sid)
    return times, hits, misses, errors


def tti_one(port, start_at=None):
    """Create then exec print(1) on one keep-alive connection:
    (total ms, sid, first exec ms)."""
    if start_at is not None:
        delay = start_at - time.perf_counter()
        if delay > 0:
            time.sleep(delay)  # deliberate: the staggered pattern's pacing
    c = connect(port)
    t0 = time.perf_counter()
    try:
        sid = create_session(port, c)
        t1 = time.perf_counter()
        exec_print1(c, sid)
        t2 = time.perf_counter()
        return (t2 - t0) * 1000.0, sid, (t2 - t1) * 1000.0
    finally:
        c.close()


def tti_patterns(d, label, pool_want=None):
    """Row 2 for one daemon: sequential, staggered, burst."""
    port = d.port
    mode = "pool" if pool_want else "cold"

    def hits():
        return metrics(port).get("ci_pool_hits_total", 0) if pool_want else 0

    # sequential
    try:
        times, first, h = [], [], 0
        errors = []
        for _ in range(CONFIG["tti_n"]):
            if pool_want and not wait_pool_full(port, pool_want, CONFIG["pool_refill_timeout_s"]):
                errors.append("pool did not refill")
                break
            h0 = hits()
            try:
                ms, sid, fx = tti_one(port)
            except Exception as e:  # noqa: BLE001
                errors.append(str(e))
                continue
            h += hits() > h0
            times.append(ms)
            first.append(fx)
            d.api.delete(sid)
        note = "one after another; the first exec alone p50 %s" % fmt_ms(pct(first, 50))
        if pool_want:
            note += "; pool refilled before each; %d/%d from pool" % (h, len(times))
        if errors:
            note += "; %d failed: %s" % (len(errors), errors[0][:120])
        s = summary(times)
        row("2", "create → first result, sequential (%s)" % label, s["n"], s["p50_ms"],
            s["p99_ms"], note=note, mode=mode, pattern="sequential", samples=times)
    except Exception as e:  # noqa: BLE001
        row_failed("2", "create → first result, sequential (%s)" % label, str(e)[:200])

    for pattern in ("staggered", "burst"):
        name = "create → first result, %s (%s)" % (pattern, label)
        try:
            if pool_want:
                wait_pool_full(port, pool_want, CONFIG["pool_refill_timeout_s"])
            n = CONFIG["stagger_n"] if pattern == "staggered" else CONFIG["burst_n"]
            h0 = hits()
            t_all = time.perf_counter()
            base = time.perf_counter() + 0.05
            with cf.ThreadPoolExecutor(n) as ex:
                if pattern == "staggered":
                    futs = [ex.submit(tti_one, port, base + i * CONFIG["stagger_ms"] / 1000.0)
                            for i in range(n)]
                else:
                    barrier = threading.Barrier(n)

                    def burst_one():
                        barrier.wait(30)
                        return tti_one(port)
                    futs = [ex.submit(burst_one) for _ in range(n)]
                results, errors = [], []
                for f in futs:
                    try:
                        results.append(f.result())
                    except Exception as e:  # noqa: BLE001
                        errors.append(str(e))
            wall = (time.perf_counter() - t_all) * 1000.0
            h = hits() - h0
            times = [ms for ms, _, _ in results]
            delete_sessions(d, [sid for _, sid, _ in results])
            if pattern == "staggered":
                note = "one every %d ms" % CONFIG["stagger_ms"]
            else:
                note = "%d at once; all done in %s" % (n, fmt_ms(wall))
            if pool_want:
                note += "; %d/%d from pool (size %d)" % (h, len(times), pool_want)
            if errors:
                note += "; %d failed: %s" % (len(errors), errors[0][:120])
            s = summary(times)
            row("2", name, s["n"], s["p50_ms"], s["p99_ms"], note=note, mode=mode,
                pattern=pattern, samples=times, failures=len(errors))
        except Exception as e:  # noqa: BLE001
            row_failed("2", name, str(e)[:200])


# ---------------------------------------------------------------- rows 3-6 (cold daemon)

def meminfo_available_kb():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1])
    return None


def mem_available_median():
    xs = []
    for _ in range(5):
        xs.append(meminfo_available_kb())
        time.sleep(0.2)  # deliberate: five samples over a second, for their median
    return statistics.median(xs)


def cgroup_memory(cid):
    """(usage bytes, rss bytes, cache bytes) of a container's memory cgroup, v1 or v2."""
    v1 = "/sys/fs/cgroup/memory/docker/%s" % cid
    v2 = "/sys/fs/cgroup/system.slice/docker-%s.scope" % cid
    if os.path.isdir(v1):
        usage = int(open(v1 + "/memory.usage_in_bytes").read())
        stat = dict(line.split() for line in open(v1 + "/memory.stat"))
        return usage, int(stat.get("total_rss", stat.get("rss", 0))), \
            int(stat.get("total_cache", stat.get("cache", 0)))
    if os.path.isdir(v2):
        usage = int(open(v2 + "/memory.current").read())
        stat = dict(line.split() for line in open(v2 + "/memory.stat"))
        return usage, int(stat.get("anon", 0)), int(stat.get("file", 0))
    return None


def shim_pss_kb(cid):
    """PSS of the containerd shim that parents this container's init."""
    out = subprocess.run(["docker", "inspect", "--format", "{{.State.Pid}}", cid],
                         capture_output=True, text=True, timeout=30)
    pid = int(out.stdout.strip() or 0)
    if pid <= 0:
        return None
    with open("/proc/%d/stat" % pid) as f:
        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
    with open("/proc/%d/cmdline" % ppid, "rb") as f:
        if b"containerd-shim" not in f.read():
            return None
    with open("/proc/%d/smaps_rollup" % ppid) as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return None


def exec_loop(port, sid, n):
    return exec_rtt.measure(port, sid, n)


def cpu_busy_ticks():
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return sum(v) - idle, sum(v)


def running_containers():
    out = subprocess.run(["docker", "ps", "-q", "--no-trunc"], capture_output=True, text=True,
                         timeout=30)
    return set(out.stdout.split())


def row3_quiet(d, probe):
    try:
        exec_loop(d.port, probe, 200)  # warm-up
        ms = exec_loop(d.port, probe, CONFIG["rtt_n"])
        s = summary(ms)
        row("3", "exec round trip, print(1), keep-alive", s["n"], s["p50_ms"], s["p99_ms"],
            note="one session, no other load; max %s" % fmt_ms(s["max_ms"]))
    except Exception as e:  # noqa: BLE001
        row_failed("3", "exec round trip, print(1), keep-alive", str(e)[:200])


def row5_density(d, probe):
    """K idle sessions on a fresh daemon: memory per session, and exec latency
    beside them. Returns the sessions (row 4 reuses them)."""
    k = CONFIG["density_k"]
    sessions = []
    try:
        time.sleep(1.0)  # deliberate: the measurement's quiet second before the baseline
        ours = set(d.containers(all_states=False))
        others0 = running_containers() - ours
        avail0 = mem_available_median()
        rss0 = d.rss_kb()
        sessions, errors = create_many(d.port, k)
        if errors:
            raise RuntimeError("%d of %d creates failed: %s" % (len(errors), k, errors[0]))
        time.sleep(3.0)  # deliberate: the kernels settle (idle memory is what is measured)
        avail1 = mem_available_median()
        rss1 = d.rss_kb()
        cids = d.containers(all_states=False)
        others1 = running_containers() - set(cids)
        cg = [m for m in (cgroup_memory(c) for c in cids) if m]
        shims = [p for p in (shim_pss_kb(c) for c in cids[:10]) if p]
        shim_mb = (sum(shims) / len(shims) / 1024.0) if shims else None
        budget_mb = CONFIG["mem_budget_gb"] * 1024
        host_mb = (avail0 - avail1) / 1024.0 / k
        fit = int(budget_mb / host_mb) if host_mb > 0 else None
        note = "%d idle sessions took %.0f MB → ~%s fit in %g GB" % (
            k, (avail0 - avail1) / 1024.0, "{:,}".format(fit) if fit else "?",
            CONFIG["mem_budget_gb"])
        if others0 != others1:
            note += " (UNRELIABLE: other containers on this machine started (%d) or stopped " \
                    "(%d) meanwhile)" % (len(others1 - others0), len(others0 - others1))
        row("5a", "host memory per idle session (MemAvailable delta)", k,
            value="%.1f MB" % host_mb, note=note, mb_per_session=host_mb,
            sessions_in_budget=fit, foreign_containers=[len(others0), len(others1)])
        if cg:
            usage = sum(u for u, _, _ in cg) / len(cg) / 2**20
            rss = sum(r for _, r, _ in cg) / len(cg) / 2**20
            cache = sum(c for _, _, c in cg) / len(cg) / 2**20
            bottom_up = usage + (shim_mb or 0)
            fit2 = int(budget_mb / bottom_up) if bottom_up > 0 else None
            row("5b", "cgroup memory per idle container (average)", len(cg),
                value="%.1f MB" % usage,
                note="usage_in_bytes = rss %.1f + cache %.1f MB; + containerd shim PSS %s "
                     "outside the cgroup = %.1f MB → ~%s fit in %g GB" % (
                         rss, cache, ("%.1f MB" % shim_mb) if shim_mb else "?", bottom_up,
                         "{:,}".format(fit2) if fit2 else "?", CONFIG["mem_budget_gb"]),
                mb_per_container=usage, rss_mb=rss, cache_mb=cache, shim_pss_mb=shim_mb,
                sessions_in_budget=fit2)
        else:
            row_na("5b", "cgroup memory per idle container", "no memory cgroup found")
        row("5c", "daemon RSS per session", k, value="%.1f KB" % ((rss1 - rss0) / k),
            note="VmRSS %.1f → %.1f MB with %d more sessions (fresh daemon)" % (
                rss0 / 1024.0, rss1 / 1024.0, k),
            kb_per_session=(rss1 - rss0) / k)
    except Exception as e:  # noqa: BLE001
        row_failed("5", "density", str(e)[:200])
    try:
        ms = exec_loop(d.port, probe, CONFIG["density_exec_n"])
        s = summary(ms)
        row("5d", "exec round trip with %d idle sessions" % len(sessions), s["n"],
            s["p50_ms"], s["p99_ms"], note="same probe session as row 3; max %s" %
            fmt_ms(s["max_ms"]))
    except Exception as e:  # noqa: BLE001
        row_failed("5d", "exec round trip with idle sessions", str(e)[:200])
    return sessions


def row4_throughput(d, sessions):
    ns = CONFIG["tput_sessions"]
    name = "throughput, trivial exec {\"code\":\"1\"}, %d sessions" % ns
    try:
        if len(sessions) < ns:
            more, errors = create_many(d.port, ns - len(sessions))
            sessions += more
            if errors:
                raise RuntimeError("%d creates failed: %s" % (len(errors), errors[0]))
        use = sessions[:ns]
        c = connect(d.port)
        for sid in use:  # each kernel has run once
            exec_print1(c, sid)
        c.close()
        cpu0, t0 = d.cpu_seconds(), time.monotonic()
        busy0, total0 = cpu_busy_ticks()
        out = subprocess.run([LOADGEN, "--port", str(d.port), "--duration",
                              str(CONFIG["tput_seconds"]), *use],
                             capture_output=True, text=True,
                             timeout=CONFIG["tput_seconds"] + 120)
        wall = time.monotonic() - t0
        daemon_cpu_s = d.cpu_seconds() - cpu0
        busy1, total1 = cpu_busy_ticks()
        machine_pct = 100.0 * (busy1 - busy0) / max(1, total1 - total0)
        if not out.stdout.strip():
            raise RuntimeError("loadgen: rc %d %s" % (out.returncode, out.stderr[:200]))
        lg = json.loads(out.stdout)
        per_exec_us = daemon_cpu_s / lg["ok"] * 1e6 if lg["ok"] else 0
        note = ("%g s, %d connections; CPU: loadgen %.0f%%, daemon %.0f%% of a core (%.0f µs "
                "per exec), machine %.0f%% busy; %d non-200, %d errors" % (
                    CONFIG["tput_seconds"], lg["connections"], lg["cpu_pct"],
                    100.0 * daemon_cpu_s / wall, per_exec_us, machine_pct, lg["non_200"],
                    lg["errors"]))
        row("4", name, lg["ok"], lg["p50_ms"], lg["p99_ms"],
            value="%s execs/s" % "{:,.0f}".format(lg["execs_per_s"]), note=note,
            execs_per_s=lg["execs_per_s"], loadgen=lg,
            daemon_cpu_pct=100.0 * daemon_cpu_s / wall, machine_cpu_pct=machine_pct)
    except Exception as e:  # noqa: BLE001
        row_failed("4", name, str(e)[:200])
    return sessions


def row6_contention(d, probe):
    n = CONFIG["contention_creates"]
    name = "exec round trip during %d concurrent cold creates" % n
    try:
        during, stop, exec_errors = [], threading.Event(), []

        def execs():
            c = connect(d.port)
            try:
                deadline = time.monotonic() + 180
                path = "/v1/sessions/%s/exec" % probe
                while not stop.is_set() and time.monotonic() < deadline:
                    t0 = time.perf_counter()
                    r = c.send("POST", path, body={"code": "print(1)"})
                    status, payload = r.status, r.body
                    ms = (time.perf_counter() - t0) * 1000.0
                    if status != 200:
                        raise RuntimeError("exec: %d %s" % (status, payload[:200]))
                    during.append((ms, json.loads(payload).get("duration_ms")))
            except Exception as e:  # noqa: BLE001 - reported in the row
                exec_errors.append(str(e))
            finally:
                c.close()
        t = threading.Thread(target=execs)
        t.start()
        # The exec loop is going (a few round trips done) before the creates.
        wait_for(lambda: len(during) >= 5 or exec_errors or not t.is_alive(), 30,
                 what="the exec loop to get going")
        n_before = len(during)
        t0 = time.perf_counter()
        with cf.ThreadPoolExecutor(n) as ex:
            futs = [ex.submit(create_session, d.port) for _ in range(n)]
            made, errors = [], []
            for f in futs:
                try:
                    made.append(f.result())
                except Exception as e:  # noqa: BLE001
                    errors.append(str(e))
        window = (time.perf_counter() - t0) * 1000.0
        n_after = len(during)
        stop.set()
        t.join(200)
        samples = during[n_before:n_after]
        delete_sessions(d, made)
        ms = [a for a, _ in samples]
        s = summary(ms)
        worst = max(samples) if samples else (0, None)
        note = "creates took %s in all; slowest exec %s (daemon's duration_ms %s)" % (
            fmt_ms(window), fmt_ms(worst[0]), worst[1])
        if errors:
            note += "; %d creates failed: %s" % (len(errors), errors[0][:100])
        if exec_errors:
            note += "; the exec loop stopped: %s" % exec_errors[0][:100]
        row("6", name, s["n"], s["p50_ms"], s["p99_ms"], note=note,
            slowest_ms=worst[0], slowest_daemon_ms=worst[1])
    except Exception as e:  # noqa: BLE001
        row_failed("6", name, str(e)[:200])


def row10_expiry(d):
    n = CONFIG["expiry_n"]
    name = "idle expiry lateness (after expires_at)"
    try:
        late, errors = expiry_lateness(d, n)
        ms = [v[0] * 1000.0 for v in late.values()]
        note = "%d sessions at once, idle_timeout_s 1 and 2, watched by GET; min %s, max %s" % (
            n, fmt_ms(min(ms)) if ms else "?", fmt_ms(max(ms)) if ms else "?")
        if errors:
            note += "; %d failed: %s" % (len(errors), str(errors[0])[:120])
        s = summary(ms)
        row("10", name, s["n"], s["p50_ms"], s["p99_ms"], note=note, max_ms=s["max_ms"])
    except Exception as e:  # noqa: BLE001
        row_failed("10", name, str(e)[:200])


def cold_phase(redis, tmp):
    d, why = start_daemon(redis, tmp, ("--pool-size", "0"))
    if d is None:
        log("--pool-size 0 refused (%s); starting without it" % why)
        d, why = start_daemon(redis, tmp, ())
    if d is None:
        for rid, name in (("1", "session create (cold)"), ("2", "create → first result (cold)"),
                          ("3", "exec round trip"), ("4", "throughput"), ("5", "density"),
                          ("6", "exec during creates"), ("10", "idle expiry lateness")):
            row_failed(rid, name, "daemon did not start: %s" % why)
        return
    try:
        # A probe session lives through the phase: rows 3, 5d and 6 exec on it.
        probe = d.api.create()["id"]
        row3_quiet(d, probe)
        # Density first, on a daemon whose heap is still fresh; throughput reuses
        # its sessions (topped up).
        sessions = row5_density(d, probe)
        sessions = row4_throughput(d, sessions)
        delete_sessions(d, sessions)

        # row 1 cold
        try:
            times, _, _, errors = measure_creates(d, CONFIG["create_n"])
            s = summary(times)
            note = "POST /v1/sessions → 201, --pool-size 0"
            if errors:
                note += "; %d failed: %s" % (len(errors), errors[0][:120])
            row("1", "session create (cold)", s["n"], s["p50_ms"], s["p99_ms"], note=note,
                mode="cold", samples=times)
        except Exception as e:  # noqa: BLE001
            row_failed("1", "session create (cold)", str(e)[:200])

        tti_patterns(d, "cold")
        row6_contention(d, probe)
        d.api.delete(probe)
        row10_expiry(d)
    finally:
        stop_daemon(d)


# ---------------------------------------------------------------- pool phase

def pool_phase(redis, tmp):
    want = CONFIG["pool_size"]
    names = ["session create (warm pool)", "create → first result (warm pool)"]
    d, why = start_daemon(redis, tmp, ("--pool-size", str(want)))
    if d is None:
        for rid, name in zip(("1", "2"), names):
            row_na(rid, name, "pool not available: the daemon refused --pool-size (%s)" % why)
        return
    try:
        m = metrics(d.port)
        if "ci_pool_size" not in m:
            for rid, name in zip(("1", "2"), names):
                row_na(rid, name, "pool not available: no ci_pool_size in /metrics")
            return
        if not wait_pool_full(d.port, want, CONFIG["pool_refill_timeout_s"]):
            for rid, name in zip(("1", "2"), names):
                row_na(rid, name, "pool not available: ci_pool_size stayed below %d for %.0fs"
                       % (want, CONFIG["pool_refill_timeout_s"]))
            return
        times, hits, misses, errors = measure_creates(d, CONFIG["create_n"], pool_want=want)
        if hits == 0:
            for rid, name in zip(("1", "2"), names):
                row_na(rid, name, "pool not available: ci_pool_hits_total stayed 0")
            return
        s = summary(times)
        note = "--pool-size %d, refilled before each; %d/%d hits" % (want, hits, hits + misses)
        if errors:
            note += "; %d failed: %s" % (len(errors), errors[0][:120])
        row("1", "session create (warm pool)", s["n"], s["p50_ms"], s["p99_ms"], note=note,
            mode="pool", samples=times)
        tti_patterns(d, "warm pool", pool_want=want)
    except Exception as e:  # noqa: BLE001
        row_failed("1", "warm pool phase", str(e)[:200])
    finally:
        stop_daemon(d)


# ---------------------------------------------------------------- baselines

DOCKER = Client(unix="/var/run/docker.sock", timeout=120)  # the Engine API, a connection a call


def docker_call(method, path, body=None):
    r = DOCKER.send(method, path, body=body)
    return r.status, r.body


def demux(raw):
    """stdout of Docker's multiplexed raw stream."""
    out, i = b"", 0
    while i + 8 <= len(raw):
        kind, size = raw[i], int.from_bytes(raw[i + 4:i + 8], "big")
        if kind == 1:
            out += raw[i + 8:i + 8 + size]
        i += 8 + size
    return out


def baseline_docker_run():
    n = CONFIG["docker_run_n"]
    name = "baseline: docker run --rm per execution"
    try:
        ms = []
        for _ in range(n):
            t0 = time.perf_counter()
            out = subprocess.run(["docker", "run", "--rm", "--label", BENCH_LABEL, CONFIG["image"],
                                  "python3", "-c", "print(1)"], capture_output=True, text=True,
                                 timeout=120)
            ms.append((time.perf_counter() - t0) * 1000.0)
            if out.returncode != 0 or out.stdout.strip() != "1":
                raise RuntimeError("docker run: rc %d %s" % (out.returncode, out.stderr[:200]))
        s = summary(ms)
        row("7", name, s["n"], s["p50_ms"], s["p99_ms"], note="docker CLI, python3 -c 'print(1)'")
    except Exception as e:  # noqa: BLE001
        row_failed("7", name, str(e)[:200])


def baseline_docker_exec():
    n = CONFIG["docker_exec_n"]
    cid = None
    try:
        out = subprocess.run(["docker", "run", "-d", "--label", BENCH_LABEL, "--network", "none",
                              CONFIG["image"], "python3", "-c",
                              "import time; time.sleep(1800)"],
                             capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise RuntimeError("docker run -d: %s" % out.stderr[:200])
        cid = out.stdout.strip()
        # Engine API: create + start (attached), read the stream to its end.
        ms = []
        for i in range(n + 2):
            t0 = time.perf_counter()
            st, body = docker_call("POST", "/containers/%s/exec" % cid,
                                   {"AttachStdout": True, "AttachStderr": True,
                                    "Cmd": ["python3", "-c", "print(1)"]})
            if st != 201:
                raise RuntimeError("exec create: %d %s" % (st, body[:200]))
            eid = json.loads(body)["Id"]
            st, raw = docker_call("POST", "/exec/%s/start" % eid, {"Detach": False, "Tty": False})
            elapsed = (time.perf_counter() - t0) * 1000.0
            if st != 200 or demux(raw).strip() != b"1":
                raise RuntimeError("exec start: %d %r" % (st, raw[:200]))
            if i >= 2:  # two warm-ups
                ms.append(elapsed)
        s = summary(ms)
        row("8", "baseline: Docker exec per execution (Engine API)", s["n"], s["p50_ms"],
            s["p99_ms"], note="POST /containers/{id}/exec + /exec/{id}/start, running container")
        ms = []
        for _ in range(n):
            t0 = time.perf_counter()
            out = subprocess.run(["docker", "exec", cid, "python3", "-c", "print(1)"],
                                 capture_output=True, text=True, timeout=120)
            ms.append((time.perf_counter() - t0) * 1000.0)
            if out.returncode != 0 or out.stdout.strip() != "1":
                raise RuntimeError("docker exec: rc %d %s" % (out.returncode, out.stderr[:200]))
        s = summary(ms)
        row("8b", "baseline: docker exec CLI per execution", s["n"], s["p50_ms"], s["p99_ms"],
            note="docker exec <c> python3 -c 'print(1)'")
    except Exception as e:  # noqa: BLE001
        row_failed("8", "baseline: Docker exec per execution", str(e)[:200])
    finally:
        if cid:
            subprocess.run(["docker", "rm", "-f", cid], capture_output=True, timeout=120)


def baseline_jupyter():
    name = "baseline: local Jupyter kernel round trip"
    try:
        from jupyter_client.manager import start_new_kernel
    except ImportError as e:
        row_na("9", name, "jupyter_client not installed (%s)" % e)
        return
    km = kc = None
    try:
        # Without this the kernel's debugger (debugpy) warns about frozen modules.
        os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
        km, kc = start_new_kernel(kernel_name="python3", startup_timeout=60)
        if km.provisioner and getattr(km.provisioner, "process", None):
            inflight("pid", km.provisioner.process.pid)
        outs = []

        def hook(msg):
            if msg["msg_type"] == "stream":
                outs.append(msg["content"]["text"])

        def run_once():
            del outs[:]
            t0 = time.perf_counter()
            reply = kc.execute_interactive("print(1)", output_hook=hook, timeout=30)
            elapsed = (time.perf_counter() - t0) * 1000.0
            if reply["content"]["status"] != "ok" or "".join(outs) != "1\n":
                raise RuntimeError("jupyter: %s %r" % (reply["content"]["status"], outs))
            return elapsed
        for _ in range(50):
            run_once()  # warm-up
        ms = [run_once() for _ in range(CONFIG["jupyter_n"])]
        s = summary(ms)
        row("9", name, s["n"], s["p50_ms"], s["p99_ms"],
            note="jupyter_client %s, ipykernel, /usr/bin/python3, no container; "
                 "execute_interactive until idle" % __import__("jupyter_client").__version__)
    except Exception as e:  # noqa: BLE001
        row_failed("9", name, str(e)[:200])
    finally:
        if kc is not None:
            kc.stop_channels()
        if km is not None:
            try:
                km.shutdown_kernel(now=True)
            except Exception:  # noqa: BLE001
                pass


# ---------------------------------------------------------------- ratios

def by(rid, pred=lambda r: True):
    for r in ROWS:
        if r["row"] == rid and not r.get("failed") and not r.get("na") and pred(r):
            return r
    return None


def ratios():
    out = []

    def faster(label, fast, slow, key="p50_ms"):
        if fast and slow and fast.get(key) and slow.get(key):
            x = slow[key] / fast[key]
            text = "%.1fx" % x if x < 10 else "{:,.0f}x".format(x)
            out.append({"name": label, "value": x, "text": "%s faster" % text
                        if x >= 1 else "%.2fx (slower)" % x})
        else:
            out.append({"name": label, "value": None, "text": "n/a"})

    def slower(label, loaded, quiet, key="p99_ms"):
        if loaded and quiet and loaded.get(key) and quiet.get(key):
            x = loaded[key] / quiet[key]
            out.append({"name": label, "value": x, "text": "%.2fx the quiet value" % x})
        else:
            out.append({"name": label, "value": None, "text": "n/a"})

    ex = by("3")
    faster("ci exec p50 vs Jupyter kernel p50", ex, by("9"))
    faster("ci exec p99 vs Jupyter kernel p99", ex, by("9"), "p99_ms")
    faster("ci exec p50 vs Docker exec (Engine API) p50", ex, by("8"))
    faster("ci exec p50 vs docker exec CLI p50", ex, by("8b"))
    faster("ci exec p50 vs docker run --rm p50", ex, by("7"))
    cold1 = by("1", lambda r: r.get("mode") == "cold")
    pool1 = by("1", lambda r: r.get("mode") == "pool")
    faster("create from pool p50 vs cold create p50", pool1, cold1)
    faster("create from pool p99 vs cold create p99", pool1, cold1, "p99_ms")
    seq_cold = by("2", lambda r: r.get("mode") == "cold" and r.get("pattern") == "sequential")
    seq_pool = by("2", lambda r: r.get("mode") == "pool" and r.get("pattern") == "sequential")
    faster("first result from pool vs cold (sequential p50)", seq_pool, seq_cold)
    faster("first result from pool vs docker run --rm (p50)", seq_pool, by("7"))
    faster("first result cold vs docker run --rm (p50)", seq_cold, by("7"))
    slower("exec p99 during creates vs quiet p99", by("6"), ex)
    slower("exec p99 with idle sessions vs quiet p99", by("5d"), ex)
    return out


# ---------------------------------------------------------------- output

def table_lines(rows, rats, markdown):
    head = ["#", "measurement", "n", "p50", "p99", "value", "notes"]
    body = []
    for r in rows:
        body.append([r["row"], r["name"], "" if r["n"] is None else str(r["n"]),
                     fmt_ms(r["p50_ms"]), fmt_ms(r["p99_ms"]),
                     "" if r["value"] is None else str(r["value"]), r["note"]])
    for q in rats:
        body.append(["ratio", q["name"], "", "", "", q["text"], ""])
    widths = [max(len(head[i]), *(len(b[i]) for b in body)) if body else len(head[i])
              for i in range(len(head))]
    right = {2, 3, 4}

    def fmt(cells):
        parts = [c.rjust(widths[i]) if i in right else c.ljust(widths[i])
                 for i, c in enumerate(cells)]
        return ("| " + " | ".join(parts) + " |") if markdown else "  ".join(parts).rstrip()
    lines = [fmt(head)]
    if markdown:
        lines.append("|" + "|".join(("-" * (w + 1) + ":") if i in right else "-" * (w + 2)
                                    for i, w in enumerate(widths)) + "|")
    else:
        lines.append("  ".join("-" * w for w in widths))
    lines += [fmt(b) for b in body]
    return lines


def machine_facts():
    facts = {"nproc": os.cpu_count(), "loadavg": open("/proc/loadavg").read().split()[:3]}
    try:
        facts["mem_total_mb"] = int(open("/proc/meminfo").readline().split()[1]) // 1024
        out = subprocess.run(["docker", "ps", "-q"], capture_output=True, text=True, timeout=30)
        facts["containers_running"] = len(out.stdout.split())
        out = subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"],
                             capture_output=True, text=True, timeout=30)
        facts["docker"] = out.stdout.strip()
    except Exception:  # noqa: BLE001
        pass
    return facts


def main():
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
    os.makedirs(OUT_DIR, exist_ok=True)
    if not os.path.exists(LOADGEN):
        log("warning: %s missing; the throughput row will fail" % LOADGEN)
    started = datetime.datetime.now(datetime.timezone.utc)
    t_start = time.monotonic()
    facts0 = machine_facts()
    log("run %s, quick=%s, config %s" % (RUN_ID, QUICK, json.dumps(CONFIG)))
    log("machine: %s" % json.dumps(facts0))
    tmp = tempfile.mkdtemp(prefix="cibench-")
    redis = None
    interrupted = None
    try:
        redis = RedisServer(tmp)
        inflight("pid", redis.proc.pid)
        cold_phase(redis, tmp)
        pool_phase(redis, tmp)
        baseline_docker_run()
        baseline_docker_exec()
        baseline_jupyter()
    except (SystemExit, KeyboardInterrupt) as e:
        # The time limit (SIGTERM) or ^C: clean up, then report what was measured.
        interrupted = "interrupted (%s) before every row was measured" % type(e).__name__
        log(interrupted)
    finally:
        if redis is not None:
            redis.stop()
        subprocess.run("docker ps -aq --filter label=%s | xargs -r docker rm -f" % BENCH_LABEL,
                       shell=True, capture_output=True, timeout=120)
        subprocess.run(["rm", "-rf", tmp])

    order = ["1", "2", "3", "4", "5a", "5b", "5c", "5d", "5", "6", "7", "8", "8b", "9", "10"]
    rows = sorted(ROWS, key=lambda r: (order.index(r["row"]) if r["row"] in order else 99))
    rats = ratios()
    elapsed = time.monotonic() - t_start
    facts1 = machine_facts()
    title = "ci benchmarks, run %s (%s%s), %s, %d cores, %.0f s; load average %s → %s" % (
        RUN_ID, started.strftime("%Y-%m-%d %H:%M UTC"), ", BENCH_QUICK" if QUICK else "",
        os.uname().nodename, facts0.get("nproc") or 0, elapsed,
        " ".join(facts0["loadavg"]), " ".join(facts1["loadavg"]))
    if interrupted:
        title += " — " + interrupted
    text = "\n".join(table_lines(rows, rats, False))
    md = "\n".join(["# %s" % title, ""] + table_lines(rows, rats, True)) + "\n"
    with open(os.path.join(OUT_DIR, "results.md"), "w") as f:
        f.write(md)
    with open(os.path.join(OUT_DIR, "results.json"), "w") as f:
        json.dump({"run_id": RUN_ID, "started_at": started.isoformat(), "elapsed_s": elapsed,
                   "interrupted": interrupted,
                   "config": CONFIG, "machine_start": facts0, "machine_end": facts1,
                   "rows": rows, "ratios": rats}, f, indent=2)
    print()
    print(title)
    print(text)
    print("\n(written to %s and results.json)" % os.path.join(OUT_DIR, "results.md"))
    try:
        os.unlink(INFLIGHT)
    except FileNotFoundError:
        pass
    failed = [r for r in ROWS if r.get("failed")]
    # The line beside this step in run.sh's closing table.
    if failed or interrupted:
        note("; ".join(([interrupted] if interrupted else []) +
                       (["%d rows failed" % len(failed)] if failed else []) +
                       ["row %s %s: %s" % (r["row"], r["name"], r["note"]) for r in failed[:2]]))
    else:
        head = {q["name"]: q["text"] for q in rats}
        note("ci exec vs Jupyter %s, vs Docker exec API %s; pool create vs cold %s" % (
            head.get("ci exec p50 vs Jupyter kernel p50", "n/a"),
            head.get("ci exec p50 vs Docker exec (Engine API) p50", "n/a"),
            head.get("create from pool p50 vs cold create p50", "n/a")))
    return 1 if failed or interrupted else 0


if __name__ == "__main__":
    sys.exit(main())

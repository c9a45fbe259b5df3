#!/usr/bin/python3
"""Per-node figures for the capacity plan (issue 15, item 7; docs/deploy.md,
"Capacity plan"): one daemon with a Redis of its own, the Redis commands of
each thing a session does, from INFO commandstats deltas, and memory.

  Redis commands per create, per exec, per keepalive that moves the clock,
  per keepalive inside the clock's 1 s coalescing window, per delete, and
  per idle second (a node without sessions, and each idle session's share)
  Redis used_memory and keys per live session
  host memory per idle session (the container's memory cgroup and its
  containerd shim's PSS), for BENCH_CAP_SESSIONS (20) sessions
  the most sessions this node held: created 4 at a time up to
  BENCH_CAP_MAX (250), stopping at the first refusal or when MemAvailable
  falls under BENCH_CAP_MIN_FREE_GB (3): the machine is shared

Run alone (CITEST_DAEMON=build/ci-daemon python3 tests/bench/bench_capacity.py)
or from `make bench` (BENCH_CAPACITY=0 skips it). Writes build/bench/capacity.json and
prints one table. Everything it starts is stopped by pid, its containers
removed by label, its Redis keys with its Redis; traffic goes only to
loopback and the Docker socket.
"""
import concurrent.futures as cf
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, HERE)
import bench  # noqa: E402  (its memory probes and the tracked daemon)
from harness import Client, RedisServer, wait_for  # noqa: E402

SESSIONS = bench.env_int("BENCH_CAP_SESSIONS", 20, 10)
EXECS = bench.env_int("BENCH_CAP_EXECS", 200, 50)
IDLE_S = bench.env_float("BENCH_CAP_IDLE_S", 10, 5)
CAP_MAX = bench.env_int("BENCH_CAP_MAX", 250, 30)
CAP_MIN_FREE_KB = bench.env_float("BENCH_CAP_MIN_FREE_GB", 3, 3) * 1024 * 1024
# Our own commands to Redis, not the daemon's.
OURS = {"info", "command", "command|docs", "dbsize", "ping", "memory|usage", "xlen"}


def log(msg):
    sys.stderr.write("[capacity %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def commandstats(redis):
    """{command: calls} of every command the server ran."""
    out = {}
    for line in redis.cli("INFO", "commandstats").splitlines():
        if line.startswith("cmdstat_"):
            name, _, rest = line[len("cmdstat_"):].partition(":")
            fields = dict(kv.split("=", 1) for kv in rest.split(","))
            if name not in OURS:
                out[name] = int(fields["calls"])
    return out


def key_bytes(redis, key):
    """MEMORY USAGE of one key (bytes), 0 when it is not there."""
    v = redis.cli("MEMORY", "USAGE", key, "SAMPLES", "0")
    return int(v) if v.isdigit() else 0


def redis_info(redis, field):
    for line in redis.cli("INFO", "memory").splitlines():
        if line.startswith(field + ":"):
            return int(line.split(":", 1)[1])
    raise AssertionError("no %s in INFO memory" % field)


class Delta:
    """Commands between enter and exit, in all and by command."""

    def __init__(self, redis):
        self.redis = redis

    def __enter__(self):
        self.before = commandstats(self.redis)
        return self

    def __exit__(self, *exc):
        after = commandstats(self.redis)
        self.by = {k: v - self.before.get(k, 0) for k, v in after.items()
                   if v - self.before.get(k, 0) > 0}
        self.total = sum(self.by.values())


def per(delta, n):
    return {"commands": delta.total / n if n else None,
            "by_command": {k: round(v / n, 3) for k, v in sorted(delta.by.items(),
                                                                key=lambda kv: -kv[1])}}


def settle(redis, seconds):
    """Commands per second while nothing is asked of the daemon."""
    with Delta(redis) as d:
        time.sleep(seconds)  # deliberate: the idle window measured
    return d


def create(client):
    status, doc = client.request("POST", "/v1/sessions", body={}, timeout=180)
    if status != 201:
        raise RuntimeError("create: %s %s" % (status, doc))
    return doc["id"]


def host_memory(d):
    """Median and mean of cgroup usage + shim PSS (KiB) over the daemon's
    containers, and how many were measured."""
    per_session = []
    for cid in d.containers():
        mem = bench.cgroup_memory(cid)
        shim = bench.shim_pss_kb(cid)
        if mem is None:
            continue
        per_session.append({"cgroup_kb": mem[0] / 1024, "anon_kb": mem[1] / 1024,
                            "file_kb": mem[2] / 1024, "shim_pss_kb": shim or 0})
    if not per_session:
        return None
    tot = [p["cgroup_kb"] + p["shim_pss_kb"] for p in per_session]
    return {"n": len(per_session),
            "median_kb": statistics.median(tot), "mean_kb": statistics.mean(tot),
            "cgroup_median_kb": statistics.median(p["cgroup_kb"] for p in per_session),
            "anon_median_kb": statistics.median(p["anon_kb"] for p in per_session),
            "shim_median_kb": statistics.median(p["shim_pss_kb"] for p in per_session)}


def redis_throughput(redis):
    """What this Redis (one core, loopback) does per second with the
    commands a session costs most: redis-benchmark, 50 clients, no
    pipelining (the daemon does not pipeline across sessions), on keys of
    the bench's own that it deletes after."""
    out = {}
    for name, cmd in (("set", ["SET", "cicap:bench:k", "__rand_int__"]),
                      ("zadd", ["ZADD", "cicap:bench:z", "1", "m__rand_int__"]),
                      ("xadd", ["XADD", "cicap:bench:x", "MAXLEN", "~", "10000", "*", "f", "v"]),
                      ("pexpire", ["PEXPIRE", "cicap:bench:k", "60000"])):
        r = subprocess.run(["redis-benchmark", "-p", str(redis.port), "-n", "100000", "-c", "50",
                            "-q", *cmd], capture_output=True, text=True, timeout=300)
        m = re.findall(r"([\d.]+) requests per second", r.stdout + r.stderr)
        if m:
            out[name] = float(m[-1])
    redis.cli("DEL", "cicap:bench:k", "cicap:bench:z", "cicap:bench:x")
    return out


def max_sessions(d, client, held):
    """Create 4 at a time until CAP_MAX, a refusal, or the memory floor."""
    why = "reached BENCH_CAP_MAX=%d (the bench's bound, not the node's)" % CAP_MAX
    with cf.ThreadPoolExecutor(4) as ex:
        while len(held) < CAP_MAX:
            free = bench.meminfo_available_kb()
            if free < CAP_MIN_FREE_KB:
                why = "MemAvailable %.1f GiB under the floor (the machine is shared)" % (
                    free / 1048576)
                break
            n = min(4, CAP_MAX - len(held))
            futs = [ex.submit(create, Client(d.port, timeout=180)) for _ in range(n)]
            errors = []
            for f in futs:
                try:
                    held.append(f.result())
                except Exception as e:  # noqa: BLE001
                    errors.append(str(e))
            if errors:
                why = "refused: %s" % errors[0][:200]
                break
    return len(held), why


def delete_all(client, ids):
    with cf.ThreadPoolExecutor(4) as ex:
        list(ex.map(lambda s: Client(client.port, timeout=180).delete(s), ids))


def main():
    os.makedirs(bench.OUT_DIR, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="cicap-")
    redis = RedisServer(tmp)
    bench.inflight("pid", redis.proc.pid)
    d = None
    out = {"sessions": SESSIONS, "execs": EXECS, "idle_s": IDLE_S}
    held = []
    try:
        d, why = bench.start_daemon(redis, tmp, ("--pool-size", "0", "--max-sessions", "1000",
                                                 "--sandbox-uid-count", "4096"))
        if d is None:
            raise RuntimeError("daemon did not start: %s" % why)
        c = Client(d.port, timeout=180)
        time.sleep(2)  # deliberate: past the start's own writes (recovery, the first ticks)
        node_idle = settle(redis, IDLE_S)
        out["idle_node_per_s"] = per(node_idle, IDLE_S)
        log("idle node: %.2f commands/s" % out["idle_node_per_s"]["commands"])

        mem0, keys0 = redis_info(redis, "used_memory"), int(redis.cli("DBSIZE"))
        rss0 = d.rss_kb()
        with Delta(redis) as dc:
            ids = [create(c) for _ in range(SESSIONS)]
        held += ids
        out["create"] = per(dc, SESSIONS)
        time.sleep(1.5)  # deliberate: the creates' fire-and-forget writes land
        mem1, keys1 = redis_info(redis, "used_memory"), int(redis.cli("DBSIZE"))
        out["redis_used_memory_per_session_bytes"] = (mem1 - mem0) / SESSIONS
        out["redis_keys_per_session"] = (keys1 - keys0) / SESSIONS
        out["daemon_rss_per_session_kb"] = (d.rss_kb() - rss0) / SESSIONS
        out["redis_session_key_bytes"] = key_bytes(redis, d.prefix + "session:" + ids[0])
        log("create: %.1f commands; %.0f bytes of Redis per session" % (
            out["create"]["commands"], out["redis_used_memory_per_session_bytes"]))

        busy_idle = settle(redis, IDLE_S)
        out["idle_with_sessions_per_s"] = per(busy_idle, IDLE_S)
        out["idle_per_session_per_s"] = max(0.0, (busy_idle.total - node_idle.total)
                                            / IDLE_S / SESSIONS)
        out["host_memory_per_idle_session"] = host_memory(d)
        log("idle: %.3f commands/s per session; host memory %s" % (
            out["idle_per_session_per_s"], out["host_memory_per_idle_session"]))

        sid = ids[0]
        t0 = time.monotonic()
        with Delta(redis) as de:
            for _ in range(EXECS):
                r = c.exec(sid, "print(1)")
                assert r["status"] == "ok", r
        secs = time.monotonic() - t0
        out["exec"] = per(de, EXECS)
        out["exec_rate_per_s"] = EXECS / secs
        log("exec: %.2f commands (%.0f execs/s)" % (out["exec"]["commands"],
                                                    out["exec_rate_per_s"]))

        time.sleep(1.2)  # deliberate: past every session's 1 s clock window
        with Delta(redis) as dk:
            for s in ids:
                st = c.request("POST", "/v1/sessions/%s/keepalive" % s)[0]
                assert st == 200, st
        out["keepalive_clock_move"] = per(dk, len(ids))
        with Delta(redis) as dq:
            for _ in range(100):
                c.request("POST", "/v1/sessions/%s/keepalive" % sid)
        out["keepalive_coalesced"] = per(dq, 100)
        log("keepalive: %.2f commands (clock moved), %.3f (inside the window)" % (
            out["keepalive_clock_move"]["commands"], out["keepalive_coalesced"]["commands"]))

        with Delta(redis) as dd:
            for s in ids:
                c.delete(s)
        held = [h for h in held if h not in ids]
        out["delete"] = per(dd, len(ids))
        time.sleep(1.5)  # deliberate: teardown's writes land
        out["redis_used_memory_per_ended_session_bytes"] = (
            redis_info(redis, "used_memory") - mem0) / SESSIONS
        out["redis_tombstone_key_bytes"] = key_bytes(redis, d.prefix + "tomb:" + ids[0])
        audit_len = int(redis.cli("XLEN", d.prefix + "audit") or 0)
        out["redis_audit_entries"] = audit_len
        out["redis_audit_bytes_per_entry"] = (
            key_bytes(redis, d.prefix + "audit") / audit_len if audit_len else None)
        log("delete: %.1f commands" % out["delete"]["commands"])

        mem_before_ramp = redis_info(redis, "used_memory")
        n, why = max_sessions(d, c, held)
        time.sleep(1.5)  # deliberate: the creates' fire-and-forget writes land
        # Over many sessions the fixed costs (the sets' and scripts' first
        # allocations) no longer weigh on the figure per session.
        out["redis_used_memory_per_session_at_max_bytes"] = (
            redis_info(redis, "used_memory") - mem_before_ramp) / n if n else None
        out["max_sessions_held"] = n
        out["max_sessions_stop"] = why
        out["mem_available_gb_at_max"] = bench.meminfo_available_kb() / 1048576
        out["daemon_rss_kb_at_max"] = d.rss_kb()
        out["daemon_fds_at_max"] = d.fd_count()
        log("held %d sessions: %s" % (n, why))
        delete_all(Client(d.port, timeout=180), held)
        held = []
        out["redis_rps"] = redis_throughput(redis)
        log("redis: %s requests/s" % out["redis_rps"])
    finally:
        if d is not None:
            try:
                delete_all(Client(d.port, timeout=180), held)
            except Exception as e:  # noqa: BLE001
                log("delete: %s" % e)
            bench.stop_daemon(d)
        redis.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        # What was measured, also when a later step failed.
        with open(os.path.join(bench.OUT_DIR, "capacity.json"), "w") as f:
            json.dump(out, f, indent=1)
    print_table(out)


def print_table(o):
    hm = o.get("host_memory_per_idle_session") or {}
    rows = [
        ("Redis commands per create", "%.1f" % o["create"]["commands"]),
        ("Redis commands per exec (print(1), %.0f/s)" % o["exec_rate_per_s"],
         "%.2f" % o["exec"]["commands"]),
        ("Redis commands per keepalive moving the clock", "%.2f" % o["keepalive_clock_move"]["commands"]),
        ("Redis commands per keepalive within 1 s", "%.3f" % o["keepalive_coalesced"]["commands"]),
        ("Redis commands per delete", "%.1f" % o["delete"]["commands"]),
        ("Redis commands per idle second, node", "%.2f" % o["idle_node_per_s"]["commands"]),
        ("Redis commands per idle second, per session", "%.3f" % o["idle_per_session_per_s"]),
        ("Redis used_memory per live session", "%.0f B" % o["redis_used_memory_per_session_bytes"]),
        ("Redis used_memory per live session, over the most held",
         "%.0f B" % (o.get("redis_used_memory_per_session_at_max_bytes") or 0)),
        ("Redis keys per live session", "%.1f" % o["redis_keys_per_session"]),
        ("  MEMORY USAGE of a session record / a tombstone",
         "%d / %d B" % (o["redis_session_key_bytes"], o["redis_tombstone_key_bytes"])),
        ("  the audit stream per entry (%d entries)" % o["redis_audit_entries"],
         "%.0f B" % (o["redis_audit_bytes_per_entry"] or 0)),
        ("Redis used_memory per ended session (tombstone + audit + ...)",
         "%.0f B" % o["redis_used_memory_per_ended_session_bytes"]),
        ("host memory per idle session (cgroup + shim), median of %s" % hm.get("n"),
         "%.1f MiB" % (hm.get("median_kb", 0) / 1024)),
        ("  of which the container's cgroup / shim PSS",
         "%.1f / %.1f MiB" % (hm.get("cgroup_median_kb", 0) / 1024,
                              hm.get("shim_median_kb", 0) / 1024)),
        ("daemon RSS per session", "%.0f KiB" % o["daemon_rss_per_session_kb"]),
        ("most sessions held on this node", "%d (%s)" % (o["max_sessions_held"],
                                                        o["max_sessions_stop"])),
        ("  daemon RSS / descriptors at that point",
         "%.0f MiB / %d" % (o["daemon_rss_kb_at_max"] / 1024, o["daemon_fds_at_max"])),
    ]
    w = max(len(r[0]) for r in rows)
    print("\n| %-*s | value |" % (w, "capacity figure (one node, its own Redis)"))
    print("|%s|-------|" % ("-" * (w + 2)))
    for name, v in rows:
        print("| %-*s | %s |" % (w, name, v))
    for k in ("create", "exec", "keepalive_clock_move", "delete"):
        print("%s: %s" % (k, o[k]["by_command"]))
    print("idle node: %s" % o["idle_node_per_s"]["by_command"])
    print("this Redis, requests/s (redis-benchmark, 50 clients): %s" % o.get("redis_rps"))
    print("idle with sessions: %s" % o["idle_with_sessions_per_s"]["by_command"])


if __name__ == "__main__":
    main()

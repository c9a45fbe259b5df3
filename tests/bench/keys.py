#!/usr/bin/python3
"""What API keys cost (issue 11), measured in one run on one machine: two
daemons of the same build on one Redis, one without keys and one with
--admin-key-file, interleaved round by round so that drift of the machine
hits both alike.

  exec round trip: print(1), one session, HTTP keep-alive, p50 per round;
    with a key vs without (the ratio is the overhead of the check)
  auth checks per second: GET /v1/sessions back to back on keep-alive
    connections (tests/bench/loadgen.c --get), with a key vs without; and how
    many Redis lookups the keyed daemon made meanwhile (its 500 ms cache)

Prints a small table and writes build/bench/keys.json and keys.md. Started
by tests/bench/run.sh (`make bench`); alone: tests/bench/keys.py [DAEMON].
Everything it starts is stopped by pid and removed by label at the end.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from harness import Daemon, RedisServer, percentile, remove_state_dir  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_KEYS_ROUNDS", "5"))
EXECS = int(os.environ.get("BENCH_KEYS_EXECS", "1000"))
GET_SECONDS = float(os.environ.get("BENCH_KEYS_GET_SECONDS", "3"))
GET_CONNS = int(os.environ.get("BENCH_KEYS_GET_CONNS", "8"))
LOADGEN = os.path.join(ROOT, "build", "bench", "loadgen")
ADMIN = "bench-admin-" + os.urandom(16).hex()


def exec_round(client, sid):
    conn = client.keep_alive()
    path = "/v1/sessions/%s/exec" % sid
    out = []
    try:
        for _ in range(50):  # warm the connection
            conn.send("POST", path, body={"code": "print(1)"})
        for _ in range(EXECS):
            t0 = time.perf_counter()
            r = conn.send("POST", path, body={"code": "print(1)"})
            out.append((time.perf_counter() - t0) * 1000.0)
            assert r.status == 200 and b'"stdout":"1\\n"' in r.body, r.body[:200]
    finally:
        conn.close()
    return percentile(out, 50)


def get_round(port, key):
    args = [LOADGEN, "--port", str(port), "--duration", str(GET_SECONDS)]
    if key:
        args += ["--api-key", key]
    args += ["--get", "/v1/sessions", "--conns", str(GET_CONNS)]
    out = subprocess.run(args, capture_output=True, text=True, timeout=GET_SECONDS + 60)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["non_200"] == 0 and doc["errors"] == 0, doc
    return doc["execs_per_s"]  # answers per second (GET here)


def hmget_calls(redis):
    for line in redis.cli("INFO", "commandstats").splitlines():
        if line.startswith("cmdstat_hmget:"):
            return int(line.split("calls=")[1].split(",")[0])
    return 0


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "ci-daemon")
    tmp = tempfile.mkdtemp(prefix="cibench-keys-")
    redis = RedisServer(tmp)
    started = []
    try:
        flags = ("--log-level", "warn", "--pool-size", "0")
        plain = Daemon(redis, tmp, flags, binary=binary)
        started.append(plain)
        keyed = Daemon(redis, tmp, flags, binary=binary, admin_key=ADMIN)
        started.append(keyed)
        key = keyed.key("bench")["key"]
        tenant = keyed.client(key)
        sids = {"plain": plain.api.create()["id"], "keyed": tenant.create()["id"]}
        clients = {"plain": plain.api, "keyed": tenant}
        res = {n: {"exec_p50_ms": [], "gets_per_s": []} for n in clients}
        lookups = []
        for name in clients:  # one round not counted: both warm up
            exec_round(clients[name], sids[name])
        for r in range(ROUNDS):
            order = ["plain", "keyed"] if r % 2 == 0 else ["keyed", "plain"]
            for name in order:
                res[name]["exec_p50_ms"].append(exec_round(clients[name], sids[name]))
            for name in order:
                before = hmget_calls(redis)
                res[name]["gets_per_s"].append(
                    get_round(plain.port if name == "plain" else keyed.port,
                              key if name == "keyed" else None))
                if name == "keyed":
                    lookups.append(hmget_calls(redis) - before)
            print("keys: round %d/%d: exec p50 plain %.3f ms, keyed %.3f ms; GET/s plain %.0f, "
                  "keyed %.0f (%d Redis lookups)" % (
                      r + 1, ROUNDS, res["plain"]["exec_p50_ms"][-1],
                      res["keyed"]["exec_p50_ms"][-1], res["plain"]["gets_per_s"][-1],
                      res["keyed"]["gets_per_s"][-1], lookups[-1]), flush=True)
        e_plain = statistics.median(res["plain"]["exec_p50_ms"])
        e_keyed = statistics.median(res["keyed"]["exec_p50_ms"])
        g_plain = statistics.median(res["plain"]["gets_per_s"])
        g_keyed = statistics.median(res["keyed"]["gets_per_s"])
        summary = {"rounds": ROUNDS, "execs_per_round": EXECS, "get_seconds": GET_SECONDS,
                   "get_connections": GET_CONNS, "per_round": res,
                   "redis_lookups_per_get_round": lookups,
                   "exec_p50_ms": {"without_key": e_plain, "with_key": e_keyed,
                                   "ratio": e_keyed / e_plain},
                   "auth_checks_per_s": {"without_key": g_plain, "with_key": g_keyed,
                                         "ratio": g_keyed / g_plain}}
        lines = ["| measurement | without a key | with a key | with / without |",
                 "|---|---|---|---|",
                 "| exec round trip print(1), p50 | %.3f ms | %.3f ms | %.3f |" % (
                     e_plain, e_keyed, e_keyed / e_plain),
                 "| GET /v1/sessions per second (auth checks/s), %d conns | %.0f | %.0f | %.3f |"
                 % (GET_CONNS, g_plain, g_keyed, g_keyed / g_plain),
                 "",
                 "Redis key lookups by the keyed daemon per %.0f s GET round: %s "
                 "(one per 500 ms cache lifetime)" % (GET_SECONDS, lookups)]
        os.makedirs(os.path.join(ROOT, "build", "bench"), exist_ok=True)
        with open(os.path.join(ROOT, "build", "bench", "keys.json"), "w") as f:
            json.dump(summary, f, indent=2)
        with open(os.path.join(ROOT, "build", "bench", "keys.md"), "w") as f:
            f.write("\n".join(lines) + "\n")
        print("\n" + "\n".join(lines))
        plain.api.delete(sids["plain"])
        tenant.delete(sids["keyed"])
    finally:
        for d in started:
            try:
                d.stop()
            finally:
                d.cleanup()
        redis.stop()
        remove_state_dir(tmp)


if __name__ == "__main__":
    main()

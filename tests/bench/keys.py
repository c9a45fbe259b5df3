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
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# compare.py puts tests/ on the path (the harness) and has the exec round:
# BENCH_COMPARE_EXECS print(1) on one keep-alive connection, its p50.
import compare  # noqa: E402
from harness import Daemon, RedisServer  # noqa: E402

ROOT = compare.ROOT
ROUNDS = int(os.environ.get("BENCH_KEYS_ROUNDS", "5"))
GET_SECONDS = float(os.environ.get("BENCH_KEYS_GET_SECONDS", "3"))
GET_CONNS = int(os.environ.get("BENCH_KEYS_GET_CONNS", "8"))
LOADGEN = os.path.join(ROOT, "build", "bench", "loadgen")
ADMIN = "bench-admin-" + os.urandom(16).hex()


def exec_round(client, sid):
    return compare.exec_round(types.SimpleNamespace(api=client), sid)


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
        # Interleaved, each going first every other round.
        orders = [["plain", "keyed"], ["keyed", "plain"]] * ROUNDS
        for r, order in enumerate(orders[:ROUNDS]):
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
                  "keyed %.0f (%d Redis HMGETs)" % (
                      r + 1, ROUNDS, res["plain"]["exec_p50_ms"][-1],
                      res["keyed"]["exec_p50_ms"][-1], res["plain"]["gets_per_s"][-1],
                      res["keyed"]["gets_per_s"][-1], lookups[-1]), flush=True)
        e_plain = statistics.median(res["plain"]["exec_p50_ms"])
        e_keyed = statistics.median(res["keyed"]["exec_p50_ms"])
        g_plain = statistics.median(res["plain"]["gets_per_s"])
        g_keyed = statistics.median(res["keyed"]["gets_per_s"])
        summary = {"rounds": ROUNDS, "execs_per_round": compare.EXECS, "get_seconds": GET_SECONDS,
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
                 "Redis HMGETs by the keyed daemon per %.0f s GET round: %s "
                 "(key lookups, one per 500 ms cache lifetime, and the quota "
                 "counter's, one per 100 ms batch)" % (GET_SECONDS, lookups)]
        compare.write_results("keys", summary, lines)
        plain.api.delete(sids["plain"])
        tenant.delete(sids["keyed"])
    finally:
        compare.stop_all(started, redis, tmp)


if __name__ == "__main__":
    main()

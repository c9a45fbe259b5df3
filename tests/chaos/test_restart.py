"""The daemon dies or is stopped, and comes back: kill -9 under load,
reconciliation of Docker with Redis on start, drain on SIGTERM, remove-on-exit,
SIGHUP reload. Nothing may be lost (a session whose container still runs keeps
its variables) and nothing may be orphaned (the chaos fixture checks every
daemon after the test)."""
import http.client
import signal
import socket
import statistics
import subprocess
import threading
import time

from chaos_lib import (assert_nothing_orphaned, assert_unavailable, container_of, create_many,
                       docker_containers, exec_code, exec_value, live_ids, pool_ready, record,
                       recovery_counts, request)
from harness import wait_for

CLIENT_TIMEOUT_S = 10


def _exec_outcome(d, sid, code, timeout=CLIENT_TIMEOUT_S):
    """('answer', status, doc) | ('closed', error) | ('refused', error) | ('timeout', error)."""
    try:
        status, doc, _ = exec_code(d, sid, code, timeout=timeout)
        return ("answer", status, doc)
    except socket.timeout as e:  # the one outcome that must never happen
        return ("timeout", repr(e))
    except ConnectionRefusedError as e:
        return ("refused", repr(e))
    except (ConnectionError, http.client.HTTPException, OSError) as e:
        return ("closed", repr(e))


def _wait_exec_ok(d, sid, code, bound):
    """Retry code until it answers 200 ok; returns (doc, the answers seen before)."""
    seen = []

    def ok():
        out = _exec_outcome(d, sid, code, timeout=5)
        if out[0] == "answer" and out[1] == 200 and out[2]["status"] == "ok":
            return out[2]
        seen.append(out if out[0] != "answer" else (out[1], out[2]))
        return None

    try:
        doc = wait_for(ok, bound, interval=0.01, what="a successful exec on %s" % sid)
    except AssertionError:
        raise AssertionError("no successful exec on %s within %ss: %s" % (sid, bound, seen[-5:]))
    return doc, seen


def test_kill9_under_load_loses_nothing(chaos):
    d = chaos()
    sids = [s["id"] for s in create_many(d, 4)]
    for sid in sids:
        assert exec_value(d, sid, "x = 0; x") == "0"

    stop = threading.Event()
    tally = {sid: {"ok": 0, "closed": 0, "refused": 0, "timeout": 0, "other": []} for sid in sids}

    def load(sid):
        t = tally[sid]
        while not stop.is_set():
            # (the sandbox's 0.2 s sleep keeps an exec in flight most of the time)
            out = _exec_outcome(d, sid, "import time; time.sleep(0.2); x += 1")
            if out[0] == "answer":
                status, doc = out[1], out[2]
                if status == 200 and doc["status"] == "ok":
                    t["ok"] += 1
                else:
                    t["other"].append((status, doc))
            else:
                t[out[0]] += 1

    threads = [threading.Thread(target=load, args=(sid,)) for sid in sids]
    for th in threads:
        th.start()
    # Mid-flight: every client has had two execs answered, and each session
    # has one running right now.
    wait_for(lambda: all(t["ok"] >= 2 for t in tally.values()) and
             all(d.api.state(sid) == "busy" for sid in sids), 30, interval=0.01,
             what="every session to be busy, after two answered execs each")
    t_kill = d.kill()
    stop.set()
    for th in threads:
        th.join(CLIENT_TIMEOUT_S + 5)
    assert not any(th.is_alive() for th in threads), "a client is still waiting"
    timeouts = {sid: t["timeout"] for sid, t in tally.items() if t["timeout"]}
    assert not timeouts, "requests hung until the client's %ss timeout: %s" % (CLIENT_TIMEOUT_S,
                                                                               timeouts)
    # Before the kill every answer is a finished exec.
    assert all(not t["other"] for t in tally.values()), tally
    assert all(t["ok"] >= 2 for t in tally.values()), tally

    d.restart()
    t_ready = time.monotonic() - t_kill
    firsts, seen_before = {}, {}
    for sid in sids:
        doc, seen = _wait_exec_ok(d, sid, "x", bound=15)
        firsts[sid] = time.monotonic() - t_kill
        seen_before[sid] = seen
        assert doc["kernel"] == "preserved", doc
        x = int(doc["result"])
        t = tally[sid]
        # Every exec answered ok ran; one cut by the kill may have run too.
        assert t["ok"] <= x <= t["ok"] + t["closed"] + len(t["other"]), (sid, x, t)
    record("kill -9 -> /readyz 200 (s)", "%.3f" % t_ready)
    record("kill -9 -> exec ok on an old session (s)",
           "first %.3f, all 4 by %.3f" % (min(firsts.values()), max(firsts.values())))
    record("kill -9 under load: requests cut by the kill / refused / hung",
           "%d / %d / 0" % (sum(t["closed"] for t in tally.values()),
                            sum(t["refused"] for t in tally.values())))
    if any(seen_before.values()):
        record("kill -9: answers before the first ok exec",
               {sid[:8]: [s[0] for s in v]
                for sid, v in seen_before.items() if v})

    # The sessions still work as sessions: a new exec counts on.
    for sid in sids:
        x = int(exec_value(d, sid, "x"))
        assert exec_value(d, sid, "x += 1; x") == str(x + 1)
    assert live_ids(d) == set(sids)
    adopted, _, tombstoned = recovery_counts(d)
    assert (adopted, tombstoned) == (4, 0), adopted_lines(d)
    assert_nothing_orphaned(d)


def adopted_lines(d):
    return "\n".join(line for line in d.read_log().splitlines()
                     if ": adopted (" in line or "recovery:" in line)


def test_registry_holds_only_client_sessions(chaos):
    """Redis is what a restarted daemon adopts from: it must name the
    clients' sessions and nothing else (not the warm pool's sandboxes, which
    have no owner)."""
    d = chaos()
    r, p, node = d.redis, d.prefix, d.node
    sids = {s["id"] for s in create_many(d, 2)}
    # The warm pool (the default size, 2) has refilled: every sandbox there
    # is to look at exists.
    wait_for(lambda: pool_ready(d) == 2 and len(d.containers()) == len(sids) + 2, 60,
             interval=0.05, what="the warm pool to refill")
    assert live_ids(d) == sids
    labelled = {sid for sid, _ in docker_containers(d.prefix).values()}
    extra = labelled - sids
    in_set = set(r.cli("SMEMBERS", "%snode:%s:sessions" % (p, node)).split())
    in_clock = set(r.cli("ZRANGE", "%sexpiry:%s" % (p, node), "0", "-1").split())
    records = {sid for sid in labelled if r.cli("EXISTS", p + "session:" + sid) == "1"}
    assert (in_set, in_clock, records) == (sids, sids, sids), (
        "registry names %d sandboxes that are no client's session (warm pool: %s)"
        % (len((in_set | in_clock | records) - sids), sorted(extra)))


def test_restart_reconciles_docker_with_redis(chaos):
    """While the daemon is dead: one session loses its record (its container
    becomes an orphan), one loses its container, one's container stops; one
    is untouched. On start: orphan removed, the other two tombstoned, the
    untouched one adopted with its variables."""
    d = chaos()
    orphan, gone, stopped, kept = [s["id"] for s in create_many(d, 4)]
    for sid in (orphan, gone, stopped, kept):
        assert exec_value(d, sid, "x = %r; x" % sid[:8]) == repr(sid[:8])
    d.kill()

    r, p, node = d.redis, d.prefix, d.node
    r.cli("DEL", p + "session:" + orphan)
    r.cli("SREM", "%snode:%s:sessions" % (p, node), orphan)
    r.cli("ZREM", "%sexpiry:%s" % (p, node), orphan)
    orphan_cid = container_of(d, orphan)
    subprocess.run(["docker", "rm", "-f", container_of(d, gone)], check=True,
                   capture_output=True, timeout=30)
    subprocess.run(["docker", "kill", container_of(d, stopped)], check=True,
                   capture_output=True, timeout=30)

    d.restart()
    assert exec_value(d, kept, "x") == repr(kept[:8])
    wait_for(lambda: orphan_cid not in d.containers(), 10, interval=0.05,
             what="the orphan container to be removed")
    wait_for(lambda: not d.containers("label=ci.session=%s" % stopped), 10, interval=0.05,
             what="the stopped container to be removed")

    status, doc, _ = request(d, "GET", "/v1/sessions/%s" % orphan)
    assert status == 404, (status, doc)  # no record, no tombstone: never heard of
    for sid in (gone, stopped):
        status, doc, _ = request(d, "GET", "/v1/sessions/%s" % sid)
        assert status == 410, (sid, status, doc)
        assert doc["error"]["code"] == "expired"
        assert "node lost: its container was gone when the daemon restarted" in \
            doc["error"]["message"], doc
        status, doc, _ = exec_code(d, sid, "x")
        assert status == 410, (sid, status, doc)
        assert r.cli("EXISTS", p + "session:" + sid) == "0"
        assert r.cli("SISMEMBER", "%snode:%s:sessions" % (p, node), sid) == "0"
        assert r.cli("ZSCORE", "%sexpiry:%s" % (p, node), sid) == ""
        assert r.cli("EXISTS", p + "tomb:" + sid) == "1"
    assert live_ids(d) == {kept}
    adopted, removed, tombstoned = recovery_counts(d)
    # removed: the orphan, the stopped one, and any warm-pool sandbox (no record)
    assert (adopted, tombstoned) == (1, 2) and removed >= 2, adopted_lines(d)
    assert_nothing_orphaned(d)


def test_sigterm_drains_then_next_daemon_adopts(chaos):
    d = chaos("--drain-timeout-s", "10")
    s1, s2 = [s["id"] for s in create_many(d, 2)]
    assert exec_value(d, s1, "x = 1; x") == "1"
    assert exec_value(d, s2, "y = 7; y") == "7"

    running = {}
    th = threading.Thread(target=lambda: running.update(
        # (the sandbox's 1.5 s: an exec the drain waits for)
        out=_exec_outcome(d, s1, "import time; time.sleep(1.5); x += 1; x", timeout=15)))
    th.start()
    wait_for(lambda: request(d, "GET", "/v1/sessions/%s" % s1)[1]["state"] == "busy", 5,
             what="the long exec to run")
    t_term = time.monotonic()
    d.proc.send_signal(signal.SIGTERM)

    def draining():
        status, doc, _ = request(d, "GET", "/readyz")
        return status == 503 and "draining" in doc["error"]["message"]

    wait_for(draining, 1, interval=0.01, what="/readyz to say draining")
    assert_unavailable(*request(d, "POST", "/v1/sessions", {}), what="create while draining")
    assert_unavailable(*exec_code(d, s2, "y"), what="exec while draining")

    th.join(15)
    assert running["out"][0] == "answer", running
    status, doc = running["out"][1], running["out"][2]
    assert status == 200 and doc["status"] == "ok" and doc["result"] == "2", running
    assert d.proc.wait(10) == 0
    t_exit = time.monotonic() - t_term
    # Functional, not a speed claim: it left once the exec ended (about 1.5 s),
    # not at its 10 s drain timeout.
    assert t_exit < 10, "drained in %.2fs, the running exec needed about 1.5s" % t_exit
    record("SIGTERM with a 1.5 s exec running -> exit 0 (s)", "%.3f" % t_exit)
    left = {sid for sid, state in docker_containers(d.prefix).values() if state == "running"}
    assert {s1, s2} <= left, "drain must leave the sessions' containers running"
    assert "drained; 2 sessions keep running for the next daemon to adopt" in d.read_log()

    d.restart()
    assert exec_value(d, s1, "x") == "2"
    assert exec_value(d, s2, "y") == "7"
    assert live_ids(d) == {s1, s2}
    assert_nothing_orphaned(d)


def test_drain_timeout_and_remove_on_exit(chaos):
    """An exec longer than the drain timeout is cut off (its client gets an
    answer or a closed connection, never a hang); remove-on-exit removes every
    container and tombstones every session."""
    d = chaos("--remove-on-exit", "true", "--drain-timeout-s", "1")
    s1, s2 = [s["id"] for s in create_many(d, 2)]
    assert exec_value(d, s2, "z = 3; z") == "3"
    running = {}
    th = threading.Thread(target=lambda: running.update(
        # (the sandbox's 8 s: longer than the drain timeout)
        out=_exec_outcome(d, s1, "import time; time.sleep(8)", timeout=CLIENT_TIMEOUT_S)))
    th.start()
    wait_for(lambda: request(d, "GET", "/v1/sessions/%s" % s1)[1]["state"] == "busy", 5,
             what="the long exec to run")
    t_term = time.monotonic()
    d.proc.send_signal(signal.SIGINT)  # SIGINT drains like SIGTERM
    assert d.proc.wait(15) == 0
    t_exit = time.monotonic() - t_term
    th.join(CLIENT_TIMEOUT_S + 5)
    assert running["out"][0] in ("answer", "closed"), running
    if running["out"][0] == "answer":
        assert running["out"][1] in (200, 503), running
    record("SIGINT, drain-timeout-s=1, an 8 s exec running -> exit 0 (s)", "%.3f" % t_exit)
    # Functional, not a speed claim: cut off at the 1 s drain timeout, before
    # the exec's own 8 s.
    assert t_exit < 8, t_exit
    log = d.read_log()
    assert "drain timeout: 1 executions still running are cut off" in log
    assert "drained; removing every session (remove-on-exit)" in log
    assert d.containers() == [], "remove-on-exit left containers"

    d.restart()
    for sid in (s1, s2):
        status, doc, _ = request(d, "GET", "/v1/sessions/%s" % sid)
        assert status == 410, (sid, status, doc)
        assert "the daemon was stopped" in doc["error"]["message"], doc
    assert live_ids(d) == set()
    assert recovery_counts(d) == (0, 0, 0)


def test_kill9_during_creates(chaos):
    """kill -9 while cold creates are in flight (env makes them skip the warm
    pool): each client gets an answer or a closed connection; after the
    restart every session that was answered 201 works, half-made ones are
    adopted or tombstoned, and no container is orphaned."""
    d = chaos()
    outcomes = []

    def create(i):
        try:
            status, doc, _ = request(d, "POST", "/v1/sessions", {"env": {"N": str(i)}},
                                     timeout=CLIENT_TIMEOUT_S)
            outcomes.append(("answer", status, doc))
        except socket.timeout as e:
            outcomes.append(("timeout", repr(e)))
        except (ConnectionError, http.client.HTTPException, OSError) as e:
            outcomes.append(("closed", repr(e)))

    # The warm pool (default size 2) is full first, so that every container
    # that appears from now on is one of these cold creates.
    wait_for(lambda: pool_ready(d) == 2 and len(d.containers()) == 2, 60, interval=0.05,
             what="the warm pool to fill")
    pool = set(d.containers())
    threads = [threading.Thread(target=create, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    # In flight: the daemon has begun making their containers.
    wait_for(lambda: set(d.containers()) - pool, 30, interval=0.01,
             what="a cold create's container to exist")
    d.kill()
    for th in threads:
        th.join(CLIENT_TIMEOUT_S + 5)
    assert len(outcomes) == 4 and not [o for o in outcomes if o[0] == "timeout"], outcomes
    made = [o[2]["id"] for o in outcomes if o[0] == "answer" and o[1] == 201]
    d.restart()
    for sid in made:
        assert exec_value(d, sid, "import os; os.environ['N']") is not None
    assert set(made) <= live_ids(d)
    adopted, removed, tombstoned = recovery_counts(d)
    record("kill -9 during 4 cold creates: answered 201 / cut; then adopted / removed / "
           "tombstoned", "%d / %d; %d / %d / %d" % (len(made), len(outcomes) - len(made),
                                                    adopted, removed, tombstoned))
    assert_nothing_orphaned(d)


def test_sighup_reloads_limits(chaos, tmp_path):
    conf = tmp_path / "ci.conf"
    conf.write_text("memory-mb = 128\nmax-memory-mb = 512\n")
    d = chaos("--config", str(conf))
    s = d.api.create()
    assert s["limits"]["memory_mb"] == 128
    assert exec_value(d, s["id"], "x = 5; x") == "5"
    big = d.api.create(limits={"memory_mb": 300})
    assert d.api.delete(big["id"]) == 204

    conf.write_text("memory-mb = 128\nmax-memory-mb = 256\n")
    d.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "SIGHUP: configuration reloaded; 1 options applied" in d.read_log(),
             5, what="the reload to be logged")
    assert "SIGHUP: max-memory-mb: 512 -> 256" in d.read_log()
    status, doc, _ = request(d, "POST", "/v1/sessions", {"limits": {"memory_mb": 300}})
    assert status == 400 and doc["error"]["code"] == "bad_request", (status, doc)
    assert "memory_mb" in doc["error"]["message"] and "256" in doc["error"]["message"], doc

    # A broken file is refused as a whole: the daemon keeps serving, old values stay.
    conf.write_text("memory-mb = 128\nmax-memory-mb = banana\n")
    d.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "SIGHUP: configuration not reloaded" in d.read_log(), 5,
             what="the refused reload to be logged")
    status, doc, _ = request(d, "POST", "/v1/sessions", {"limits": {"memory_mb": 300}})
    assert status == 400, (status, doc)
    assert request(d, "GET", "/readyz")[0] == 200
    assert exec_value(d, s["id"], "x") == "5"  # the session lived through both reloads
    assert_nothing_orphaned(d)


def test_kill9_restart_is_fast_repeatedly(chaos):
    """Three kills in a row: each restart adopts the same sessions again."""
    d = chaos()
    sids = [s["id"] for s in create_many(d, 2)]
    for sid in sids:
        exec_value(d, sid, "n = 0")
    times = []
    for _ in range(3):
        t_kill = d.kill()
        d.restart()
        for sid in sids:
            _wait_exec_ok(d, sid, "n", bound=10)
        times.append(time.monotonic() - t_kill)
        for sid in sids:
            exec_value(d, sid, "n += 1")
    for sid in sids:
        assert exec_value(d, sid, "n") == "3"
    record("kill -9 -> exec ok on every old session, 3 rounds (s)",
           "p50 %.3f, max %.3f" % (statistics.median(times), max(times)))
    assert_nothing_orphaned(d)

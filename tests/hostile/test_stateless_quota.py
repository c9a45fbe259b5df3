"""Issue 28 items 4 and 6: the stateless tier is the operator's and the
quotas' to bound, not the tenant's to take. A run a quota refused used to go
down its ladder to the stateless rung and run on the host all the same; a
tenant over its executions quota ran four jobs there at once, the whole
node's tier; the rung's time was never counted; and the operator could not
turn the tier off.

The daemons here have no Docker engine (--docker names a socket that is not
there), so a run's sandbox tier is always unavailable and its ladder is what
answers: the stateless rung is taken exactly when nothing but these guards
stands in the way. Each daemon has host uids of its own for the tier.

Checked to fail on the code before the fix (51c19f8): the refused runs were
answered by the stateless tier (degraded.mode "stateless"), two runs of one
tenant ran in the tier at once, exec_seconds_last_hour stayed 0, and
--stateless and the "stateless" quota were refused as unknown."""
import os
import random
import threading

import pytest

from harness import wait_for
from harness.stateless import host_uid_procs

pytestmark = pytest.mark.skipif(not os.path.exists("/usr/bin/bwrap"),
                                reason="bubblewrap is not installed (deploy/setup.sh)")

ADMIN = "admin-key-stateless-quota-0123456789"


def no_engine(make_daemon, tmp_path, *extra, **options):
    uid_base = random.randrange(300_000, 1_000_000_000, 100)
    d = make_daemon("--docker", str(tmp_path / "no-engine.sock"), "--pool-size", "0",
                    "--sandbox-uid-base", str(uid_base), "--stateless-timeout-s", "20",
                    *extra, wait_ready=False, **options)
    # The tier's host uids (base-1 down; 4 runs and the start check's).
    d.tier_uids = set(range(uid_base - 6, uid_base))
    if "off" not in extra:
        d.wait_log("stateless tier: available", timeout=30)
    return d


def post_run(client, body, timeout=90):
    status, doc = client.request("POST", "/v1/runs", body=body, timeout=timeout)
    assert status == 200, (status, doc)
    return doc


def ran_stateless(doc):
    return (doc.get("degraded") or {}).get("mode") == "stateless"


def tried(doc):
    return (doc.get("degraded") or {}).get("tried") or ""


class Background:
    """A POST /v1/runs in a thread of its own; .doc once it answered."""

    def __init__(self, client, body):
        self.doc = None
        self.error = None
        self.thread = threading.Thread(target=self._run, args=(client, body), daemon=True)
        self.thread.start()

    def _run(self, client, body):
        try:
            self.doc = post_run(client, body)
        except Exception as e:  # pylint: disable=broad-except  (reported by join)
            self.error = e

    def join(self):
        self.thread.join(120)
        assert not self.thread.is_alive(), "the run did not answer"
        if self.error:
            raise self.error
        return self.doc


SLEEPY = "import time\ntime.sleep(4)\n'slept'\n"


def in_the_tier(d, code):
    """A run started in the background, once its code runs in the tier
    (a process of the tier's uids is there)."""
    wait_for(lambda: not host_uid_procs(d.tier_uids), 10, what="the start check's run gone")
    run = Background(d.api, {"code": code, "on_failure": ["stateless"]})
    wait_for(lambda: host_uid_procs(d.tier_uids), 30, interval=0.01,
             what="the first run's processes in the tier")
    return run


def test_the_ladder_answers_without_an_engine(make_daemon, tmp_path):
    # The premise of this file: with nothing in the way, the rung is taken.
    d = no_engine(make_daemon, tmp_path)
    doc = post_run(d.api, {"code": "6 * 7", "on_failure": ["stateless"]})
    assert ran_stateless(doc) and doc["result"]["result"] == "42", doc


def test_a_quota_refusal_does_not_take_the_stateless_rung(make_daemon, tmp_path):
    # memory_mb 1: every one-shot run is refused by the quota at once.
    d = no_engine(make_daemon, tmp_path, "--quota-memory-mb", "1")
    doc = post_run(d.api, {"code": "print('ran on the host')", "on_failure": ["stateless", "manual"]})
    assert not ran_stateless(doc), doc
    assert doc["degraded"]["mode"] == "manual", doc          # the next rung answers
    assert "over a quota" in tried(doc), doc
    assert "ran on the host" not in str(doc.get("result")), doc


def test_stateless_runs_count_against_executions_and_exec_seconds(make_daemon, tmp_path):
    d = no_engine(make_daemon, tmp_path, "--quota-executions", "1")
    first = in_the_tier(d, SLEEPY)
    # The first run holds the tenant's one execution while it is in the tier:
    # a second is refused, and the refusal does not run it there either.
    doc = post_run(d.api, {"code": "print('second')", "on_failure": ["stateless", "manual"]})
    assert not ran_stateless(doc) and doc["degraded"]["mode"] == "manual", doc
    assert "over a quota" in tried(doc), doc
    doc = first.join()
    assert ran_stateless(doc) and doc["result"]["result"] == "'slept'", doc
    # Its time in the tier counts against exec_seconds_per_hour.
    def counted():
        st, u = d.api.request("GET", "/v1/usage")
        return st == 200 and u["usage"]["exec_seconds_last_hour"] >= 3.5
    wait_for(counted, 10, what="the stateless run's time in the usage")


def test_a_tenant_has_a_cap_of_its_own_on_the_tier(make_daemon, tmp_path):
    # --quota-stateless-runs is 1 by default: one of the tenant's runs in the
    # tier at a time, whatever the node's --stateless-max-running (4).
    d = no_engine(make_daemon, tmp_path)
    first = in_the_tier(d, SLEEPY)
    doc = post_run(d.api, {"code": "print('second')", "on_failure": ["stateless", "manual"]})
    assert not ran_stateless(doc) and doc["degraded"]["mode"] == "manual", doc
    assert "stateless_runs quota" in tried(doc), doc
    assert ran_stateless(first.join())


def test_the_tenant_permission_in_the_quota_record(make_daemon, tmp_path):
    d = no_engine(make_daemon, tmp_path, admin_key=ADMIN)
    denied = d.client(d.key("no-stateless")["key"])
    allowed = d.client(d.key("stateless-ok")["key"])
    st, doc = d.admin.request("PUT", "/v1/admin/tenants/no-stateless/quota",
                              body={"stateless": False})
    assert st == 200 and doc["quota"]["stateless"] is False, (st, doc)
    assert doc["overrides"] == {"stateless": False}, doc
    st, doc = d.admin.request("PUT", "/v1/admin/tenants/no-stateless/quota",
                              body={"stateless": 0})
    assert st == 400 and "true or false" in doc["error"]["message"], (st, doc)
    doc = post_run(denied, {"code": "print('ran on the host')", "on_failure": ["stateless", "manual"]})
    assert not ran_stateless(doc) and "\"stateless\" quota is false" in tried(doc), doc
    doc = post_run(allowed, {"code": "6 * 7", "on_failure": ["stateless"]})
    assert ran_stateless(doc), doc


def test_the_operator_can_turn_the_tier_off(make_daemon, tmp_path):
    d = no_engine(make_daemon, tmp_path, "--stateless", "off")
    d.wait_log("stateless tier: off", timeout=30)
    doc = post_run(d.api, {"code": "print('ran on the host')", "on_failure": ["stateless", "manual"]})
    assert not ran_stateless(doc) and doc["degraded"]["mode"] == "manual", doc
    assert "off on this node" in tried(doc), doc

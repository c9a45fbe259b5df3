"""What a daemon leaves on the host (issue 9, finding 14): state directories
of warm sandboxes after a kill -9, and the sandbox network with its firewall
chain. Start-up reconciliation and `ci-ctl gc` find and remove them; each case
counts them before and after."""
import json
import signal
import os
import subprocess
import uuid

from chaos_lib import create_many, live_ids
from harness import wait_for


def state_dirs(d):
    sdir = os.path.join(d.state_dir, "s")
    return {n for n in os.listdir(sdir) if len(n) == 36}


def test_kill9_leaves_no_state_dirs_of_the_warm_pool(chaos):
    d = chaos("--pool-size", "2")
    sid = create_many(d, 1)[0]["id"]
    wait_for(lambda: len(state_dirs(d)) == 3, 30, interval=0.05,
             what="the warm pool's two sandboxes beside the session")
    pool_dirs = state_dirs(d) - {sid}
    d.kill()
    # The pool's directories are still there: nobody removed them.
    assert state_dirs(d) >= pool_dirs | {sid}
    mark = d.log_mark()  # the first start logged a recovery line too
    d.restart()
    d.wait_log("stale state directories removed", timeout=30, since=mark)
    left = state_dirs(d)
    assert sid in left, left
    assert not (pool_dirs & left), (pool_dirs, left)
    assert live_ids(d) == {sid}


def test_ctl_gc_finds_and_removes_stale_state_dirs(chaos):
    d = chaos("--pool-size", "0")
    d.wait_orphan_sweep()  # (the sweep would remove the stale directory too)
    sid = create_many(d, 1)[0]["id"]
    stale = str(uuid.uuid4())
    os.mkdir(os.path.join(d.state_dir, "s", stale), 0o711)
    before = state_dirs(d)
    assert before == {sid, stale}, before
    r = d.ctl("--json", "gc")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["state_dirs"] == [stale], r.stdout
    r = d.ctl("gc", "--force")
    assert r.returncode == 0 and "removed 1 stale state directory" in r.stdout, r.stdout
    assert state_dirs(d) == {sid}
    # The session is untouched.
    status, doc = d.api.request("POST", "/v1/sessions/%s/exec" % sid, body={"code": "6*7"})
    assert status == 200 and doc["result"] == "42", doc


def _net_and_chain(d):
    """(network ids of this daemon's prefix, chains named after their bridges)."""
    nets = d.networks()
    chains = []
    for net in nets:
        out = subprocess.run(["docker", "network", "inspect", net, "--format",
                              '{{index .Options "com.docker.network.bridge.name"}}'],
                             capture_output=True, text=True, timeout=30)
        chains.append("CI-IN-" + out.stdout.strip()[2:])
    return nets, chains


def _attached(net):
    """How many containers Docker still lists on a network (it detaches a
    removed container's endpoint a moment after the removal)."""
    out = subprocess.run(["docker", "network", "inspect", net, "--format", "{{len .Containers}}"],
                         capture_output=True, text=True, timeout=30)
    return int(out.stdout.strip() or 0)


def _chain_exists(chain):
    return subprocess.run(["iptables", "-w", "-n", "-L", chain], capture_output=True).returncode == 0


def _networked(d):
    # A made-up name that is never resolved (hosts-only): the session only
    # needs to be on the sandbox network.
    status, doc = d.api.request("POST", "/v1/sessions",
                                body={"network": {"allow": ["nothing.test:443"]}})
    assert status == 201, doc
    return doc["id"]


def test_unused_sandbox_network_and_chain_are_removed(chaos):
    d = chaos("--pool-size", "0", "--egress-resolver", "hosts-only")
    # Just after the daemon's own sweep, which would otherwise remove the
    # unused network first if it came between the delete and our gc.
    d.wait_orphan_sweep()
    sid = _networked(d)
    nets, chains = _net_and_chain(d)
    assert len(nets) == 1 and _chain_exists(chains[0]), (nets, chains)
    chain = chains[0]
    # In use: gc leaves it alone.
    r = d.ctl("--json", "gc")
    assert r.returncode == 0 and json.loads(r.stdout)["networks"] == [], r.stdout
    assert d.api.delete(sid) == 204
    # Unused now (Docker has detached the session's container from it, which
    # is what gc looks at): listed, then removed with its chain.
    wait_for(lambda: _attached(nets[0]) == 0, 30, interval=0.05,
             what="Docker to detach the deleted session's container from the network")
    found = json.loads(d.ctl("--json", "gc").stdout)["networks"]
    assert [n["chain"] for n in found] == [chain], found
    r = d.ctl("gc", "--force")
    assert r.returncode == 0 and "removed unused sandbox network" in r.stdout, r.stdout
    assert d.networks() == [] and not _chain_exists(chain)
    # The next networked session builds both again.
    sid = _networked(d)
    assert len(d.networks()) == 1 and _chain_exists(chain)
    assert d.api.delete(sid) == 204
    # A daemon that stops with nothing on the network takes both away.
    assert d.stop() == 0
    assert d.networks() == [] and not _chain_exists(chain)
    # kill -9 leaves them; the next start removes them (nothing to adopt).
    d.restart()
    sid = _networked(d)
    assert d.api.delete(sid) == 204
    d.kill()
    assert len(d.networks()) == 1 and _chain_exists(chain)
    d.restart()
    wait_for(lambda: d.networks() == [] and not _chain_exists(chain), 30, interval=0.1,
             what="start-up reconciliation to remove the network and its chain")


def test_network_of_adopted_sessions_stays(chaos):
    d = chaos("--pool-size", "0", "--egress-resolver", "hosts-only")
    sid = _networked(d)
    _, chains = _net_and_chain(d)
    d.kill()
    mark = d.log_mark()  # the first start logged a recovery line too
    d.restart()
    d.wait_log("recovery:", timeout=30, since=mark)
    assert live_ids(d) == {sid}
    assert len(d.networks()) == 1 and _chain_exists(chains[0])
    r = d.ctl("--json", "gc")
    assert json.loads(r.stdout)["networks"] == [], r.stdout


def test_a_second_signal_exits_at_once_and_leaves_nothing_unowned(chaos):
    """SIGTERM starts a drain; a second one stops the loop at once, with warm
    sandboxes still starting and their teardown in flight. The daemon exits 0,
    frees what it still held (no leak report under ASan), and the next start
    removes what the cut-short shutdown left behind."""
    d = chaos("--pool-size", "2")
    sid = create_many(d, 1)[0]["id"]
    # A warm sandbox is being made: its create is in flight at the signal.
    wait_for(lambda: len(state_dirs(d)) >= 2, 30, interval=0.02,
             what="the warm pool starting")
    d.proc.send_signal(signal.SIGTERM)
    d.proc.send_signal(signal.SIGTERM)
    assert d.proc.wait(30) == 0
    d.log.close()
    assert not d.sanitizer_errors(), d.read_log()[-6000:]
    mark = d.log_mark()
    d.restart()
    d.wait_log("recovery:", timeout=30, since=mark)
    assert live_ids(d) == {sid}
    wait_for(lambda: not (state_dirs(d) - {sid} - pool_dirs_now(d)), 30, interval=0.1,
             what="no state directory but the session's and the new pool's")


def pool_dirs_now(d):
    """The directories of warm sandboxes this daemon runs now (its containers
    that are no client's session)."""
    out = subprocess.run(["docker", "ps", "-a", "--format", '{{.Label "ci.session"}}',
                          "--filter", "label=ci.prefix=%s" % d.prefix],
                         capture_output=True, text=True, timeout=30)
    return set(out.stdout.split()) - live_ids(d)

"""Issue 13, item 4: retention per tenant, by count per workspace and by age.

The reaper of each node deletes, every --snapshot-retention-every-s, the
snapshots of a workspace beyond the newest --snapshot-keep and those older
than --snapshot-max-age-s: the objects in the store first, then the record.
A pending snapshot (its upload still retrying) is never removed by it."""
import os

from harness import wait_for


def snapshot(api, sid, **body):
    st, doc = api.request("POST", "/v1/sessions/%s/snapshots" % sid, body=body)
    assert st == 201, (st, doc)
    return doc


def listed(api, workspace=None):
    path = "/v1/snapshots" + ("?workspace=%s" % workspace if workspace else "")
    st, doc = api.request("GET", path)
    assert st == 200, (st, doc)
    return [r["id"] for r in doc["snapshots"]]


def objects(d, snap_id):
    base = os.path.join(d.state_dir, "store", "snapshots", "default", snap_id)
    return sorted(os.listdir(base)) if os.path.isdir(base) else []


def test_retention_keeps_the_newest_of_each_workspace(make_daemon):
    d = make_daemon("--snapshot-keep", "2", "--snapshot-retention-every-s", "1")
    api = d.api
    a = api.create(workspace="keep-a")["id"]
    b = api.create(workspace="keep-b")["id"]
    api.exec(a, "open('/workspace/f.txt', 'w').write('a')")
    api.exec(b, "open('/workspace/f.txt', 'w').write('b')")
    # The objects are checked while retention cannot touch them yet: with
    # --snapshot-keep 2, keep-a's first is a candidate only once a third
    # exists, and the reaper runs every second, so after the fourth it may
    # already be gone.
    made_a = [snapshot(api, a, variables=False)["id"]]
    assert objects(d, made_a[0]) == ["manifest.json", "workspace.tar"]
    made_a += [snapshot(api, a, variables=False)["id"] for _ in range(3)]
    made_b = [snapshot(api, b, variables=False)["id"]]
    # Newest first: the two newest of keep-a stay, keep-b's only one too.
    wait_for(lambda: listed(api, "keep-a") == made_a[:1:-1], timeout=30,
             what="retention trims keep-a to its newest two")
    assert listed(api, "keep-b") == made_b
    for old in made_a[:2]:
        wait_for(lambda: objects(d, old) == [], timeout=10)
        st, _ = api.request("GET", "/v1/snapshots/%s" % old)
        assert st == 404
    for kept in made_a[2:] + made_b:
        assert objects(d, kept) == ["manifest.json", "workspace.tar"]
    # A kept one still restores.
    st, doc = api.request("POST", "/v1/sessions", body={"restore": made_a[-1]})
    assert st == 201 and doc["restored"]["snapshot"] == made_a[-1], (st, doc)
    m = d.metrics()
    assert m.get('ci_snapshots_total{outcome="expired"}') == 2, m


def test_retention_removes_snapshots_past_their_age(make_daemon):
    d = make_daemon("--snapshot-max-age-s", "2", "--snapshot-retention-every-s", "1")
    api = d.api
    sid = api.create()["id"]
    api.exec(sid, "open('/workspace/f.txt', 'w').write('x')")
    old = snapshot(api, sid, variables=False)["id"]
    assert old in listed(api)
    wait_for(lambda: old not in listed(api), timeout=30,
             what="a snapshot older than --snapshot-max-age-s is removed")
    assert objects(d, old) == []

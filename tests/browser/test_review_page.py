"""Issue 12: the reviewer's page (GET /review) in a real headless browser:
Debian's chromium driven by playwright-core (pinned in package.json,
installed by deploy/setup.sh with npm ci). A reviewer pastes a tenant's key,
sees the pending cases with their attempts side by side, edits the code and
approves one, rejects another with a comment; a case whose code and error
hold markup renders it as text and runs nothing. The decisions are checked
through the API."""
import json
import os
import shutil
import subprocess
import time
import uuid


ADMIN = "admin-" + "b" * 40
HERE = os.path.dirname(os.path.abspath(__file__))
CHROMIUM = os.environ.get("CITEST_CHROMIUM", "/usr/bin/chromium")
HOSTILE = ("<img src=x onerror=\"window.__pwned=1;alert(1)\"></script>"
           "<script>window.__pwned=2</script><iframe src=/v1/reviews></iframe>")


def seed(d, tenant, attempts, goal="sum the column"):
    rid, run = str(uuid.uuid4()), str(uuid.uuid4())
    now = int(time.time() * 1000)
    doc = {"id": run, "status": "degraded", "goal": goal, "attempts": attempts}
    key = "%sreview:%s:%s" % (d.prefix, tenant, rid)
    d.redis.cli("HSET", key, "run", run, "state", "pending", "case", json.dumps(doc),
                "created_ms", str(now))
    d.redis.cli("EXPIRE", key, "600")
    d.redis.cli("ZADD", "%sreviews:%s" % (d.prefix, tenant), str(now), rid)
    return rid


def attempt(n, code, source, ename="NameError", evalue="name 'pd' is not defined"):
    return {"n": n, "code": code, "status": "error", "source": source, "duration_ms": 40 + n,
            "error": {"ename": ename, "evalue": evalue,
                      "traceback": ["Traceback (most recent call last):", "  ...", ename]}}


def test_review_page_in_chromium(make_daemon):
    # Fail clearly, never skip: make test must run this suite.
    assert os.access(CHROMIUM, os.X_OK), (
        "chromium is not installed at %s: run deploy/setup.sh (apt package chromium)" % CHROMIUM)
    assert os.path.isdir(os.path.join(HERE, "node_modules", "playwright-core")), (
        "playwright-core is not installed: run deploy/setup.sh (npm ci in tests/browser)")
    node = shutil.which("node")
    assert node, "node is not installed: run deploy/setup.sh"

    d = make_daemon("--pool-size", "0", admin_key=ADMIN)
    tenant_key = d.key("acme")["key"]
    other = seed(d, "umbrella", [attempt(1, "print('not yours')", "submitted")])
    approve = seed(d, "acme", [attempt(1, "df = pd.read_csv('a.csv')", "submitted"),
                               attempt(2, "import pandas as pd\ndf = pd.read_csv('a.csv')",
                                       "fixer", "FileNotFoundError", "a.csv")])
    reject = seed(d, "acme", [attempt(1, "open('x').read()", "submitted"),
                              attempt(2, "open('/workspace/x').read()", "rule")])
    hostile = seed(d, "acme", [{"n": 1, "code": HOSTILE, "source": HOSTILE, "status": "error",
                                "error": {"ename": "</script><b>", "evalue": HOSTILE,
                                          "traceback": HOSTILE}}], goal=HOSTILE)
    env = dict(os.environ, CI_URL="http://127.0.0.1:%d" % d.port, CI_KEY=tenant_key,
               CI_CHROMIUM=CHROMIUM,
               CI_CASES=json.dumps({"approve": approve, "reject": reject, "hostile": hostile}))
    out = subprocess.run([node, os.path.join(HERE, "review_page.mjs")], cwd=HERE, env=env,
                         capture_output=True, text=True, timeout=180)
    lines = out.stdout.strip().splitlines()
    assert lines, "the browser script printed nothing: %s" % out.stderr[-3000:]
    seen = json.loads(lines[-1])
    assert out.returncode == 0 and "failure" not in seen, (seen.get("failure"), out.stderr[-3000:])

    # What the reviewer saw.
    assert seen["stored"] == {"session": True, "local": 0, "cookie": ""}
    assert seen["side_by_side"] is True
    assert seen["attempt_codes"] == ["df = pd.read_csv('a.csv')",
                                     "import pandas as pd\ndf = pd.read_csv('a.csv')"]
    assert seen["attempt_errors"][1] == "FileNotFoundError: a.csv"
    assert "fixer" in seen["sources"][1] and "submitted" in seen["sources"][0]
    assert seen["textarea_before"] == "import pandas as pd\ndf = pd.read_csv('a.csv')"
    assert seen["reject_without_comment"] == "A rejection needs a comment."
    assert seen["approve_outcome"].startswith("Approved")
    assert seen["reject_outcome"].startswith("Rejected")
    # The hostile case is text: no element made, nothing run, no dialog.
    assert seen["hostile_code"] == HOSTILE
    assert seen["hostile_error"].startswith("</script><b>: <img")
    assert seen["hostile_textarea"] == HOSTILE
    assert seen["hostile_elements"]["img"] == 0
    assert seen["hostile_elements"]["iframe"] == 0
    assert seen["hostile_elements"]["script"] == 1  # the page's own app.js
    assert seen["hostile_elements"]["pwned"] is None
    assert seen["dialogs"] == [] and seen["errors"] == []
    # Only this tenant's cases, and the decided ones left the list.
    assert other not in seen["after_reload"]
    assert approve not in seen["after_reload"] and reject not in seen["after_reload"]
    assert hostile in seen["after_reload"]

    # The decisions landed.
    api = d.client(tenant_key)
    status, a = api.request("GET", "/v1/reviews/" + approve)
    assert status == 200 and a["state"] == "approved"
    assert a["code"] == "print('edited in the browser')\n" and a["comment"] == "looks right now"
    status, r = api.request("GET", "/v1/reviews/" + reject)
    assert status == 200 and r["state"] == "rejected"
    assert r["comment"] == "wrong approach: use the CSV reader" and r["code"] is None
    status, h = api.request("GET", "/v1/reviews/" + hostile)
    assert h["state"] == "pending"
    # The other tenant's case is untouched.
    assert d.redis.cli("HGET", "%sreview:umbrella:%s" % (d.prefix, other), "state") == "pending"

"""The fixer client (daemon/fixer.c over daemon/httpc.c) against a scripted
OpenAI-compatible server (harness.FakeLLM) over real HTTP on loopback,
through build/tools/fixer-probe (the daemon's own objects on a libevent
loop; the run engine will call the same fixer_ask). A good reply, a reply
with no code block, HTTP 500, an unknown model, a dropped connection, a
reply slower than the deadline, a refused port; the headers and the prompt
the model is sent."""
import json
import os
import subprocess

import pytest

from harness import DAEMON_BIN, ROOT, FakeLLM, free_port

PROBE = os.environ.get("CITEST_FIXER_PROBE", os.path.join(ROOT, "build", "tools", "fixer-probe"))

PROMPT = {
    "goal": "sum the sales per region and plot them",
    "code": "import pandas as pd\ndf = pd.read_csv('sales.csv')\nplt.bar(df.region, df.total)\n",
    "ename": "NameError",
    "evalue": "name 'plt' is not defined",
    "traceback": ["Traceback (most recent call last):",
                  "  File \"<cell>\", line 3, in <module>",
                  "NameError: name 'plt' is not defined"],
    "stdout": "loaded 12 rows\n",
    "stderr": "",
    "vars": [{"name": "df", "type": "DataFrame"}, {"name": "pd", "type": "module"}],
    "files": ["sales.csv", "notes/readme.txt"],
    "attempt": 1,
    "max_attempts": 3,
}


def probe(url, model="m1", key=None, timeout_ms=5000, prompt=None):
    """Ask once; the probe's answer. Its exit is waited on with a bound (the
    deadline under test is far shorter), and it must exit 0: under ASan a
    leak or an error would not."""
    req = {"url": url, "model": model, "timeout_ms": timeout_ms, "prompt": prompt or PROMPT}
    if key is not None:
        req["key"] = key
    r = subprocess.run([PROBE], input=json.dumps(req), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_a_good_reply_gives_its_code():
    fixed = "import matplotlib.pyplot as plt\nplt.bar([1], [2])"
    with FakeLLM(replies={"m1": [fixed]}) as llm:
        out = probe(llm.url)
    assert out["error"] is None
    assert out["code"] == fixed
    assert out["fixer_ms"] >= 0


def test_replies_are_consumed_in_order_and_the_last_repeats():
    with FakeLLM(replies={"m1": ["a = 1", "a = 2"]}) as llm:
        codes = [probe(llm.url)["code"] for _ in range(3)]
    assert codes == ["a = 1", "a = 2", "a = 2"]


def test_a_reply_with_no_code_block_is_an_error():
    with FakeLLM(replies={"m1": [{"content": "Sorry, I cannot fix this."}]}) as llm:
        out = probe(llm.url)
    assert out["code"] is None
    assert "no code block" in out["error"]
    assert llm.url in out["error"]


def test_http_500_is_an_error_naming_the_status():
    with FakeLLM(replies={"m1": [{"status": 500}]}) as llm:
        out = probe(llm.url)
    assert out["code"] is None
    assert "HTTP 500" in out["error"]


def test_an_unknown_model_is_an_error_naming_the_status():
    with FakeLLM(replies={"m1": ["x = 1"]}) as llm:
        out = probe(llm.url, model="nope")
    assert out["code"] is None
    assert "HTTP 404" in out["error"] and "does not exist" in out["error"]


def test_a_dropped_connection_is_an_error():
    with FakeLLM(replies={"m1": [{"close": True}]}) as llm:
        out = probe(llm.url)
    assert out["code"] is None and out["error"]


def test_a_slow_reply_past_the_deadline_says_the_deadline():
    with FakeLLM(replies={"m1": [{"delay_s": 30, "code": "late = 1"}]}) as llm:
        out = probe(llm.url, timeout_ms=300)
        assert len(llm.requests) == 1
    assert out["code"] is None
    assert "deadline of 300 ms" in out["error"]
    assert out["fixer_ms"] >= 300


def test_a_refused_port_says_the_fixer_is_unreachable():
    url = "http://127.0.0.1:%d/v1" % free_port()  # bound, then closed: nothing listens
    out = probe(url)
    assert out["code"] is None
    assert "unreachable" in out["error"] and url in out["error"]


def test_the_key_is_sent_as_a_bearer_token_and_only_when_there_is_one():
    with FakeLLM(replies={"m1": ["x = 1"]}) as llm:
        probe(llm.url, key="sk-test-123")
        probe(llm.url)
        assert llm.headers[0]["Authorization"] == "Bearer sk-test-123"
        assert llm.headers[0]["Content-Type"] == "application/json"
        assert llm.headers[1].get("Authorization") is None


def test_the_prompt_carries_goal_code_error_traceback_output_vars_and_files():
    with FakeLLM(replies={"m1": ["x = 1"]}) as llm:
        probe(llm.url)
        body = llm.requests[0]
    assert body["model"] == "m1"
    assert body["temperature"] == 0
    system, user = body["messages"]
    assert system["role"] == "system" and "```python" in system["content"]
    assert user["role"] == "user"
    text = user["content"]
    for part in [PROMPT["goal"], "plt.bar(df.region, df.total)",
                 "NameError: name 'plt' is not defined",
                 "File \"<cell>\", line 3, in <module>", "loaded 12 rows",
                 "- df: DataFrame", "- pd: module", "- sales.csv", "- notes/readme.txt",
                 "Attempt 1 of 3"]:
        assert part in text, part


def test_a_huge_answer_is_refused_at_the_cap():
    with FakeLLM(replies={"m1": [{"content": "```python\n" + "x" * (2 << 20) + "\n```"}]}) as llm:
        out = probe(llm.url)
    assert out["code"] is None
    assert "larger than the cap" in out["error"]


@pytest.mark.parametrize("flag,value", [
    ("--fixer-url", "file:///etc/passwd"),
    ("--fixer-url", "http://user:pw@127.0.0.1:1/v1"),
    ("--fixer-allowed-urls", "http://127.0.0.1:1,gopher://127.0.0.1:1"),
    ("--fixer-timeout-ms", "99"),
])
def test_the_daemon_refuses_a_bad_fixer_option_at_start(flag, value):
    r = subprocess.run([DAEMON_BIN, "--listen", "127.0.0.1:%d" % free_port(), flag, value],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert flag[2:] in r.stderr


def test_the_environment_proxy_is_not_used():
    """http_proxy and friends name a port where nothing listens: a client
    that took them would fail; ours goes straight to the fixer."""
    dead = "http://127.0.0.1:%d" % free_port()
    env = dict(os.environ, http_proxy=dead, HTTP_PROXY=dead, https_proxy=dead, ALL_PROXY=dead,
               all_proxy=dead, NO_PROXY="", no_proxy="")
    with FakeLLM(replies={"m1": ["x = 1"]}) as llm:
        req = {"url": llm.url, "model": "m1", "timeout_ms": 5000, "prompt": PROMPT}
        r = subprocess.run([PROBE], input=json.dumps(req), capture_output=True, text=True,
                           timeout=60, env=env)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["code"] == "x = 1"
        assert len(llm.requests) == 1

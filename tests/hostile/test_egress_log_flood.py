"""A sandbox flooding the daemon's log through the proxy (issue 28 item 8).

Each refused proxy request wrote one log line: 72,186 lines (14.2 MiB) in
20 s from one session. Now the refusal line is rate-limited per session (10
per 10 s), the next line written says how many were left out, the session's
end reports the rest, and ci_egress_decisions_total counts every refusal.
The refused destination is a made-up name the allowlist does not hold: the
proxy refuses it before resolving anything.
"""
import re
import time

DENIED = 'ci_egress_decisions_total{decision="denied"}'
BURST, WINDOW_S = 10, 10


def test_a_refusal_flood_writes_a_bounded_log_and_counts_every_refusal(hostile):
    h = hostile
    s = h.create(limits={"exec_timeout_s": 60},
                 network={"allow": ["allowed.test:%d" % h.recorder.port]})
    sid = s["id"]
    n = 3000
    try:
        before = h.metric(DENIED)
        mark = h.d.log_mark()
        t0 = time.monotonic()
        r = h.exec(sid, r"""
import os, socket, urllib.parse
p = urllib.parse.urlsplit(os.environ['HTTP_PROXY'])
refused = 0
for i in range(%d):
    c = socket.create_connection((p.hostname, p.port), timeout=10)
    c.sendall(b'CONNECT notlisted.test:443 HTTP/1.1\r\nHost: notlisted.test:443\r\n\r\n')
    if c.recv(64).startswith(b'HTTP/1.1 403'):
        refused += 1
    c.close()
print(refused)
""" % n, timeout_s=60)
        elapsed = time.monotonic() - t0
        assert r["status"] == "ok" and r["stdout"].strip() == str(n), r
        # the metric counts every refusal (the suite is serial: they are ours)
        h.wait_for(lambda: h.metric(DENIED) - before >= n, 10, what="the metric")
        assert h.metric(DENIED) - before == n
        lines = [l for l in h.d.log_since(mark).splitlines()
                 if "egress: session %s " % sid in l and "DENIED" in l]
        bound = BURST * (int(elapsed // WINDOW_S) + 2)
        print("\n[refusal flood] %d refusals in %.1f s -> %d log lines (bound %d)"
              % (n, elapsed, len(lines), bound))
        assert 0 < len(lines) <= bound, (len(lines), bound)
        told = sum(int(m.group(1)) for l in lines
                   for m in [re.search(r"\((\d+) refusals of this session not logged", l)] if m)
    finally:
        h.delete(sid)
    # the end of the session tells the rest: written + left out == refused
    def rest():
        m = re.search(r"egress: session %s ended: (\d+) refusals of it were not logged" % sid,
                      h.d.log_since(mark))
        return int(m.group(1)) if m else 0
    h.wait_for(lambda: len(lines) + told + rest() == n, 30,
               what="the session's end to report the refusals left out")
    h.assert_daemon_fine()

"""Measurements that a test checks for correctness and a benchmark reports as
numbers (how punctual idle expiry is): one implementation for both."""
import threading
import time

from .daemon import parse_time
from .wait import wait_for


def expiry_lateness(d, n, timeouts=(1, 2)):
    """Create n sessions on daemon d concurrently, idle_timeout_s taking turns
    among `timeouts`, and watch each until it is gone (410). Returns
    ({sid: (seconds after its expires_at that it was seen gone, the 410's
    message, the create's document)}, [errors]).

    Watching is by GET, which is no activity: the clock must not slide on its
    own (checked on every poll). A session still there 5 s after its
    expires_at is an error (a hang detector)."""
    late, errors = {}, []

    def one(i):
        try:
            status, doc = d.api.request("POST", "/v1/sessions",
                                        body={"idle_timeout_s": timeouts[i % len(timeouts)]},
                                        timeout=60)
            assert status == 201, (status, doc)
            sid = doc["id"]
            expires = parse_time(doc["expires_at"])
            seen = {}

            def gone():
                status, body = d.api.request("GET", "/v1/sessions/%s" % sid, timeout=10)
                now = time.time()
                if status == 410:
                    seen["late"] = (now - expires, body["error"]["message"], doc)
                    return True
                assert status == 200, (sid, status, body)
                assert parse_time(body["expires_at"]) == expires, (doc, body)
                return False

            # Poll often only near the deadline: the sampling's resolution
            # there, without loading the daemon the rest of the time.
            wait_for(gone, expires + 5 - time.time(),
                     interval=lambda: 0.005 if expires - time.time() < 0.2 else 0.05,
                     what="session %s to expire (5 s after its expires_at)" % sid)
            late[sid] = seen["late"]
        except Exception as e:  # noqa: BLE001 - reported to the caller
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return late, errors

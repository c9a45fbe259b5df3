"""Finding 10: allowlist IP literals were parsed loosely (0177.0.0.1, meant
as octal loopback, was read as the decimal 177 prefix). Now an ambiguous IPv4 literal (leading zeros,
shorthand such as 127.1, hex, a bare integer, a name ending in a number) in an
allowlist is a 400 bad_request naming the entry, at create and at PATCH; a
wildcard never covers IP literals; and the proxy refuses a request target
that is not a canonical IP literal, whatever the allowlist says."""
import pytest

AMBIGUOUS = ["0177.0.0.1", "127.1", "0x7f.1", "0x7f000001", "2130706433", "127.0.0.01",
             "0177.0.0.1:443", "127.1:80", "127.000.0.1", "foo.123"]


def _bad_request(st, doc, entry):
    assert st == 400 and doc["error"]["code"] == "bad_request", (entry, st, doc)
    assert entry in doc["error"]["message"], (entry, doc)


@pytest.mark.parametrize("entry", AMBIGUOUS)
def test_create_refuses_an_ambiguous_ipv4_literal(hostile, entry):
    st, doc = hostile.api.request("POST", "/v1/sessions",
                                  body={"network": {"allow": ["allowed.test", entry]}})
    _bad_request(st, doc, entry)
    assert "ambiguous IPv4 literal" in doc["error"]["message"], doc
    assert "network.allow[1]" in doc["error"]["message"], doc


def test_create_refuses_a_wildcard_over_ip_literals(hostile):
    for entry in ("*.0.0.1", "*.127.0.0.1", "*.0x7f"):
        st, doc = hostile.api.request("POST", "/v1/sessions",
                                      body={"network": {"allow": [entry]}})
        _bad_request(st, doc, entry)


def test_patch_refuses_an_ambiguous_ipv4_literal(hostile):
    h = hostile
    with h.victim(network={"allow": ["allowed.test:%d" % h.http.port]}) as s:
        for entry in ("0177.0.0.1", "127.1:%d" % h.http.port, "2130706433"):
            st, doc = h.api.request("PATCH", "/v1/sessions/%s" % s["id"],
                                    body={"network": {"allow": [entry]}})
            _bad_request(st, doc, entry)
        # the list in force is unchanged
        st, doc = h.api.request("GET", "/v1/sessions/%s" % s["id"])
        assert doc["network"]["allow"] == ["allowed.test:%d" % h.http.port], doc
        # a canonical literal is taken
        st, doc = h.api.request("PATCH", "/v1/sessions/%s" % s["id"],
                                body={"network": {"allow": ["127.0.0.1:%d" % h.http.port]}})
        assert st == 200, (st, doc)
    h.assert_daemon_fine()


def test_proxy_refuses_non_canonical_literal_targets(hostile):
    # The allowlist has the canonical loopback literal (trusted port of our
    # HTTP server); the same address written any other way is refused 400,
    # and never reaches our server.
    h = hostile
    port = h.http.port
    with h.victim(network={"allow": ["127.0.0.1:%d" % port]}) as s:
        seen = len(h.http.seen)
        raws = []
        for lit in ("0177.0.0.1", "127.1", "0x7f.0.0.1", "2130706433", "127.0.0.01"):
            raws.append(b"CONNECT %s:%d HTTP/1.1\r\n\r\n" % (lit.encode(), port))
            raws.append(b"GET http://%s:%d/ HTTP/1.1\r\nHost: %s:%d\r\n\r\n"
                        % (lit.encode(), port, lit.encode(), port))
        answers = h.proxy_raw(s, raws)
        for raw, a in zip(raws, answers):
            assert a.startswith("HTTP/1.1 400"), (raw, a)
            assert "not a canonical IP address" in a, (raw, a)
        assert len(h.http.seen) == seen, h.http.seen[seen:]
        # The canonical form works (so the refusals were about the form).
        ok = h.proxy_raw(s, [b"GET http://127.0.0.1:%d/canonical HTTP/1.1\r\n"
                             b"Host: 127.0.0.1:%d\r\n\r\n" % (port, port)])[0]
        assert ok.startswith("HTTP/1.0 200"), ok
        assert h.http.seen[seen:] == [("127.0.0.1", "/canonical", "127.0.0.1:%d" % port)]
    h.assert_daemon_fine()

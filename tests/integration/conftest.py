"""The integration suite's answers are held against docs/openapi.yaml (the
drift check, harness/openapi_check.py): every answer a test reads from a
daemon through harness.http must be one the spec documents, so the spec
cannot drift from the daemon. CITEST_OPENAPI=0 turns it off (to measure its
cost, or to see a test's own failure first)."""
import pytest

from harness import openapi_check


@pytest.fixture(autouse=True)
def openapi_drift_check():
    if not openapi_check.is_on():
        yield
        return
    openapi_check.reset()
    openapi_check.enable(openapi_check.shared_checker())
    try:
        yield
    finally:
        openapi_check.disable()
    # An answer read in a thread, or inside a wait_for that retried past it,
    # fails the test here.
    found = openapi_check.mismatches()
    assert not found, "\n".join(str(m) for m in found[:20])


def pytest_terminal_summary(terminalreporter):
    if openapi_check.is_on():
        answers, lines, seconds = openapi_check.counts()
        terminalreporter.write_line("openapi drift check: %d answers and %d NDJSON lines checked "
                                    "against docs/openapi.yaml in %.3f s" % (answers, lines, seconds))
        if answers:
            left = openapi_check.shared_checker().unexercised()
            terminalreporter.write_line("openapi drift check: %d operations no answer came from: %s"
                                        % (len(left), " ".join("%s %s" % op for op in left)))

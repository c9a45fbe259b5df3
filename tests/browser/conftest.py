"""The browser suite: the harness's fixtures (tests/conftest.py) and the
chromium and playwright-core it needs, which deploy/setup.sh installs.
Missing, the suite fails (it does not skip): make test must run it."""

"""Which sandbox image the suites run against.

The daemon under test inherits CID_IMAGES (NAME=TAG,...) and CID_IMAGE (the
default profile's name) from the test's environment, so a run such as
`CID_IMAGES=python=ci/python:t14 tests/run-all.sh` tests that image. A test
that runs a container of its own (docker create/run, an image built on top
of the sandbox image) asks here for the same tag, never names
ci/python:latest itself.
"""
import os

DEFAULT_TAG = "ci/python:latest"  # the daemon's own default (daemon/config.c)


def image_tag(profile=None):
    """The tag the daemon under test maps profile to (default: the daemon's
    default profile, CID_IMAGE or python), as CID_IMAGES says; the daemon's
    default tag when CID_IMAGES does not name it."""
    profile = profile or os.environ.get("CID_IMAGE") or "python"
    for part in os.environ.get("CID_IMAGES", "python=" + DEFAULT_TAG).split(","):
        name, _, tag = part.strip().partition("=")
        if name == profile and tag:
            return tag
    return DEFAULT_TAG

"""Issue 14, images: GET /v1/images (the profiles, their tags, whether the
engine has them, their recipe and package versions, read from the labels
images/python/build.sh writes, cached), the data-science stack in the
sandbox image, and the commands docs/images.md gives a newcomer.

The images made here are tiny (an empty root filesystem imported with
labels), tagged ci-test/images-<run>, and removed afterwards."""
import io
import json
import os
import re
import subprocess
import tarfile
import threading
import uuid

import pytest

from harness import image_tag, wait_for

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(ROOT, "images", "python", "build.sh")
DOC = os.path.join(ROOT, "docs", "images.md")
DAEMON_BIN = os.environ.get("CITEST_DAEMON", os.path.join(ROOT, "build", "ci-daemon"))

# What the issue asks the image to carry, as Debian names it.
DATA_SCIENCE = ["python3-numpy", "python3-pandas", "python3-matplotlib", "python3-scipy",
                "python3-sklearn", "python3-statsmodels", "python3-numexpr",
                "python3-bottleneck", "python3-sympy", "python3-seaborn", "python3-networkx",
                "python3-openpyxl", "python3-xlrd", "python3-pil", "python3-lxml",
                "python3-bs4", "python3-requests", "python3-tabulate", "python3-ipython"]


def python_tag():
    """The tag of the python profile the suite runs against (CID_IMAGES)."""
    return image_tag("python")


def docker_inspect(ref):
    out = subprocess.run(["docker", "image", "inspect", ref], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)[0]


def import_image(tag, labels):
    """A real image with nothing in it but labels (docker import of an empty
    tar): what the daemon reads of an image is its labels."""
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w"):
        pass
    cmd = ["docker", "import"]
    for k, v in labels.items():
        cmd += ["--change", "LABEL %s=%s" % (k, json.dumps(v))]
    out = subprocess.run(cmd + ["-", tag], input=tar.getvalue(), capture_output=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr


def remove_image(tag):
    subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True, timeout=120)


@pytest.fixture
def test_tag():
    """A tag of this test's own, removed afterwards whatever happened."""
    tag = "ci-test/images-%s:t" % uuid.uuid4().hex[:10]
    yield tag
    remove_image(tag)


def images_of(client):
    status, doc = client.request("GET", "/v1/images")
    assert status == 200, doc
    return {im["name"]: im for im in doc["images"]}


def test_lists_profiles_present_and_missing(make_daemon):
    tag = python_tag()
    ghost = "ci-test/no-such-image-%s:none" % uuid.uuid4().hex[:10]
    d = make_daemon("--images", "python=%s,ghost=%s" % (tag, ghost))
    ims = images_of(d.api)
    assert list(ims) == ["python", "ghost"]
    py, gh = ims["python"], ims["ghost"]
    assert py["tag"] == tag and py["default"] is True and py["present"] is True
    real = docker_inspect(tag)
    labels = real["Config"]["Labels"] or {}
    assert py["id"] == real["Id"] and py["size"] == real["Size"]
    assert py["recipe"] == labels.get("ci.recipe") and py["recipe"]
    assert py["profile"] == labels.get("ci.image")
    assert py["suite"] == labels.get("ci.suite") and py["python"] == labels.get("ci.python")
    if "ci.packages" in labels:
        want = dict(p.split("=", 1) for p in labels["ci.packages"].split(","))
        assert py["packages"] == want
    else:
        assert py["packages"] is None
    # A profile whose image is not there is said so, not an error.
    assert gh == {"name": "ghost", "tag": ghost, "default": False, "present": False,
                  "checked_at": gh["checked_at"], "id": None, "created": None, "size": None,
                  "recipe": None, "profile": None, "protocol": None, "suite": None,
                  "debian": None, "python": None, "packages": None}
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$", gh["checked_at"])
    # Any tenant's route, only GET.
    status, doc = d.api.request("POST", "/v1/images", body={})
    assert status == 405 and doc["error"]["code"] == "method_not_allowed"


def test_the_image_carries_the_data_science_stack_and_its_record():
    """The sandbox image lists the stack with its versions, in its labels
    and in /opt/ci/packages.json (what build.sh records at build time)."""
    tag = python_tag()
    labels = docker_inspect(tag)["Config"]["Labels"] or {}
    assert "ci.packages" in labels, "%s was built without a package record" % tag
    listed = dict(p.split("=", 1) for p in labels["ci.packages"].split(","))
    missing = [p for p in DATA_SCIENCE if p not in listed]
    assert not missing, missing
    assert labels["ci.python"].startswith("3.") and labels["ci.suite"]
    out = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--read-only", "--tmpfs", "/tmp", tag,
         "/usr/bin/python3", "-I", "-c",
         "import json, sklearn, statsmodels.api, numexpr, bottleneck, networkx, xlrd, bs4, "
         "IPython, pandas, numpy\n"
         "r = json.load(open('/opt/ci/packages.json'))\n"
         "print(json.dumps({'listed': r['listed'], 'n': len(r['installed']), "
         "'sklearn': sklearn.__version__, 'python': r['python']}))"],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rec = json.loads(out.stdout)
    assert rec["listed"] == listed  # the label and the file say the same
    assert rec["n"] > len(listed)   # the file has the dependencies too
    assert rec["python"] == labels["ci.python"]
    assert listed["python3-sklearn"].startswith(rec["sklearn"].split(".post")[0][:3])


def test_the_default_image_is_debian_13():
    """The issue's stack: the default recipe (ci.image "python") is Debian 13
    with Python 3.13, numpy 2 and pandas 2, as the image itself says when
    imported; an image of the bookworm profile says Debian 12. The image is
    the one the suite runs against (CID_IMAGES), built by build.sh."""
    tag = python_tag()
    labels = docker_inspect(tag)["Config"]["Labels"] or {}
    profile = labels.get("ci.image")
    if profile not in ("python", "bookworm"):
        pytest.skip("%s is profile %r, neither the default recipe nor bookworm" % (tag, profile))
    out = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--read-only", "--tmpfs", "/tmp", tag,
         "/usr/bin/python3", "-I", "-c",
         "import json, platform, numpy, pandas, scipy, sklearn, matplotlib\n"
         "print(json.dumps({'python': platform.python_version(), 'numpy': numpy.__version__,"
         " 'pandas': pandas.__version__, 'debian': open('/etc/debian_version').read().strip()}))"],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    major = lambda v: int(v.split(".")[0])  # noqa: E731
    if profile == "python":
        assert labels["ci.suite"] == "trixie", "%s is an old default image (%s): rebuild it " \
            "(images/python/build.sh)" % (tag, labels.get("ci.suite"))
        assert got["debian"].startswith("13."), got
        assert got["python"].startswith("3.13."), got
        assert major(got["numpy"]) == 2 and major(got["pandas"]) == 2, got
    else:
        assert labels["ci.suite"] == "bookworm" and got["debian"].startswith("12."), got
        assert got["python"].startswith("3.11."), got
    assert got["python"] == labels["ci.python"]


def test_labels_are_read_as_outside_input_and_cached(make_daemon, test_tag):
    """An image's labels are the image maker's: junk entries are skipped and
    the answer is cached (checked_at stays) until it is stale; a removed
    image then shows as missing."""
    import_image(test_tag, {
        "ci.recipe": "abc123", "ci.image": "tiny", "ci.suite": "trixie",
        "ci.python": "3.13.5", "ci.debian": "13.1", "ci.protocol": "1",
        "ci.packages": "python3=3.13.5-1,python3-numpy=1:2.2.4+ds-1,BAD=1,"
                       "python3-x=,=2,python3-y=not-a-version,nothing,"
                       "python3-pandas=2.2.3+dfsg-5",
    })
    d = make_daemon("--images", "python=%s,tiny=%s" % (python_tag(), test_tag))
    first = images_of(d.api)["tiny"]
    assert first["present"] is True and first["profile"] == "tiny"
    assert first["suite"] == "trixie" and first["python"] == "3.13.5"
    assert first["debian"] == "13.1" and first["recipe"] == "abc123"
    assert first["packages"] == {"python3": "3.13.5-1", "python3-numpy": "1:2.2.4+ds-1",
                                 "python3-pandas": "2.2.3+dfsg-5"}
    # Many at once: all answered, from one inspect (one checked_at).
    got, errors = [], []

    def one():
        try:
            got.append(images_of(d.api)["tiny"]["checked_at"])
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(repr(e))
    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and len(got) == 8
    assert set(got) == {first["checked_at"]}
    # Removed: the cache holds it until it is stale, then it is missing.
    remove_image(test_tag)
    wait_for(lambda: images_of(d.api)["tiny"]["present"] is False, 40,
             what="the removed image to show as missing")
    assert images_of(d.api)["tiny"]["packages"] is None


def test_an_image_without_a_record(make_daemon, test_tag):
    """Built before build.sh recorded packages (or not by it): present,
    with no package list rather than an empty one."""
    import_image(test_tag, {"maker": "someone else"})
    d = make_daemon("--images", "python=%s,bare=%s" % (python_tag(), test_tag))
    bare = images_of(d.api)["bare"]
    assert bare["present"] is True and bare["id"].startswith("sha256:")
    assert bare["packages"] is None and bare["recipe"] is None and bare["suite"] is None


def test_a_tag_that_is_no_reference(make_daemon):
    """The option is the operator's; a tag docker would refuse is said so,
    and the engine is not asked with it."""
    d = make_daemon("--images", "python=%s,odd=ci/odd tag?x" % python_tag())
    odd = images_of(d.api)["odd"]
    assert odd["present"] is None and "reference" in odd["error"]


# ------------------------------------------------------------ the newcomer's doc

def doc_commands():
    """The build.sh command lines of docs/images.md's code blocks."""
    with open(DOC) as f:
        text = f.read()
    blocks = re.findall(r"```(?:sh|console|bash)?\n(.*?)```", text, re.S)
    cmds = []
    for b in blocks:
        for line in b.splitlines():
            line = line.strip().lstrip("$# ").strip()
            if line.startswith("images/python/build.sh"):
                cmds.append(line.split("#")[0].strip())
    return text, cmds


def run_print(args):
    out = subprocess.run([BUILD, *args, "--print"], capture_output=True, text=True, timeout=60,
                         cwd=ROOT)
    assert out.returncode == 0, (args, out.stderr)
    info = dict(line.split(" ", 1) for line in out.stdout.strip().splitlines())
    info["packages"] = info["packages"].split()
    return info


def test_docs_commands_work_without_building(tmp_path):
    """Every build.sh command docs/images.md shows takes its options (run
    with --print: what would be built, nothing built), and the profile the
    doc walks through merges its list as the doc says."""
    text, cmds = doc_commands()
    assert len(cmds) >= 5, cmds
    # The doc's own profile, "mine", made as the doc says, in a scratch dir.
    doc_mine = tmp_path / "doc" / "mine"
    (doc_mine / "files" / "opt" / "ci").mkdir(parents=True)
    listed = re.search(r"printf '([^']*)' > images/python/profiles/mine/packages.txt", text)
    assert listed, "the doc's packages.txt step"
    (doc_mine / "packages.txt").write_text(listed.group(1).replace("\\n", "\n"))
    for cmd in cmds:
        args = [str(doc_mine) if a == "images/python/profiles/mine" else a
                for a in cmd.split()[1:]]
        info = run_print(args)
        assert info["packages"][0] == "python3"
        if str(doc_mine) in args:
            assert info["name"] == "mine" and "python3-geopandas" in info["packages"]
    # The default (Debian 13), the bookworm profile (Debian 12), and the
    # example profile.
    base = run_print([])
    assert base["name"] == "python" and base["suite"] == "trixie"
    assert all(p in base["packages"] for p in DATA_SCIENCE)
    assert "python3-distutils" not in base["packages"]  # gone in Python 3.12
    bookworm = run_print(["--profile", os.path.join(ROOT, "images", "python", "profiles",
                                                    "bookworm"),
                          "--tag", "ci/python-bookworm:latest"])
    assert bookworm["name"] == "bookworm" and bookworm["suite"] == "bookworm"
    with open(os.path.join(ROOT, "images", "python", "packages.bookworm.txt")) as f:
        suite_extra = [w for line in f for w in line.split("#")[0].split()]
    assert "python3-distutils" in suite_extra
    assert bookworm["packages"] == base["packages"] + suite_extra
    assert bookworm["recipe"] != base["recipe"]
    # --suite alone: the same suite, the name of a suite build, not the profile's.
    plain = run_print(["--suite", "bookworm"])
    assert plain["name"] == "python-bookworm" and plain["suite"] == "bookworm"
    assert plain["packages"] == bookworm["packages"] and plain["recipe"] != bookworm["recipe"]
    example = os.path.join(ROOT, "images", "python", "profiles", "example")
    ex = run_print(["--profile", example, "--tag", "ci/python-example:latest"])
    with open(os.path.join(example, "packages.txt")) as f:
        extra = [w for line in f for w in line.split("#")[0].split()]
    assert ex["name"] == "example"
    assert ex["packages"] == base["packages"] + [p for p in extra if not p.startswith("-")]
    # A profile of one's own: its list adds and drops, its files count.
    mine = tmp_path / "mine"
    (mine / "files" / "etc").mkdir(parents=True)
    (mine / "packages.txt").write_text("# mine\npython3-yaml\n-python3-seaborn\n")
    (mine / "files" / "etc" / "mine.conf").write_text("a=1\n")
    m1 = run_print(["--profile", str(mine)])
    assert m1["name"] == "mine"
    assert "python3-yaml" in m1["packages"] and "python3-seaborn" not in m1["packages"]
    (mine / "files" / "etc" / "mine.conf").write_text("a=2\n")
    assert run_print(["--profile", str(mine)])["recipe"] != m1["recipe"]
    # Registering it: the daemon takes --images NAME=TAG as the doc says.
    assert "--images" in text and "GET /v1/images" in text
    helptext = subprocess.run([DAEMON_BIN, "--help"], capture_output=True, text=True,
                              timeout=30).stdout
    assert "--images" in helptext


def test_build_refuses_bad_arguments(tmp_path):
    for args, msg in ([["--suite", "../x"], "Debian suite"],
                      [["--profile", str(tmp_path / "none")], "not a directory"],
                      [["--bogus"], "unknown argument"]):
        out = subprocess.run([BUILD, *args, "--print"], capture_output=True, text=True,
                             timeout=60)
        assert out.returncode != 0 and msg in out.stderr, (args, out.stderr)
    empty = tmp_path / "empty"
    empty.mkdir()
    out = subprocess.run([BUILD, "--profile", str(empty), "--print"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode != 0 and "none of packages.txt" in out.stderr
    bad = tmp_path / "Bad Name"
    bad.mkdir()
    (bad / "packages.txt").write_text("python3-yaml\n")
    out = subprocess.run([BUILD, "--profile", str(bad), "--print"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode != 0 and "must be [a-z0-9_-]" in out.stderr
    nopy = tmp_path / "nopy"
    nopy.mkdir()
    (nopy / "packages.txt").write_text("-python3\n")
    out = subprocess.run([BUILD, "--profile", str(nopy), "--print"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode != 0 and "drop python3" in out.stderr
    # A profile's suite file is a suite name, as --suite is.
    badsuite = tmp_path / "badsuite"
    badsuite.mkdir()
    (badsuite / "suite").write_text("# a comment\n../etc\n")
    out = subprocess.run([BUILD, "--profile", str(badsuite), "--print"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode != 0 and "Debian suite" in out.stderr
    (badsuite / "suite").write_text("# no suite\n")
    out = subprocess.run([BUILD, "--profile", str(badsuite), "--print"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode != 0 and "names no suite" in out.stderr
    # ... and --suite overrides it.
    (badsuite / "suite").write_text("bookworm\n")
    out = subprocess.run([BUILD, "--profile", str(badsuite), "--suite", "trixie", "--print"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "suite trixie\n" in out.stdout, out.stderr

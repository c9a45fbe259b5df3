"""What Docker says about a session container: every hardening field."""
import json
import os
import subprocess


def test_docker_inspect_shows_every_hardening_field(hostile):
    h = hostile
    limits = {"memory_mb": 96, "cpus": 0.5, "pids": 48, "disk_mb": 24, "exec_timeout_s": 5}
    with h.victim(limits=limits) as s:
        doc = h.inspect(s["id"])
        cfg, hc = doc["Config"], doc["HostConfig"]
        uid, gid = (int(x) for x in cfg["User"].split(":"))
        assert uid == gid and 200000 <= uid < 200000 + 4096, cfg["User"]  # its own uid
        assert cfg["Hostname"] == "sandbox", cfg["Hostname"]
        assert s["id"] not in doc["Name"], doc["Name"]
        assert cfg["Labels"]["ci.session"] == s["id"], cfg["Labels"]
        assert cfg["Labels"]["ci.prefix"] == h.d.prefix, cfg["Labels"]
        assert hc["Privileged"] is False
        assert hc["CapDrop"] == ["ALL"], hc["CapDrop"]
        assert not hc.get("CapAdd"), hc.get("CapAdd")
        assert "no-new-privileges" in (hc["SecurityOpt"] or []), hc["SecurityOpt"]
        assert not any("unconfined" in o for o in hc["SecurityOpt"] or []), hc["SecurityOpt"]
        assert any(o.startswith("seccomp={") for o in hc["SecurityOpt"]), hc["SecurityOpt"]
        assert hc["ReadonlyRootfs"] is True
        mb = 1024 * 1024
        tmpfs = hc["Tmpfs"]
        binds = hc["Binds"] or []
        # /workspace: the session's own loop-mounted image (workspace-backend
        # loop, where the node can), else a tmpfs like /tmp.
        loop_ws = len(binds) == 2
        assert set(tmpfs) == ({"/tmp"} if loop_ws else {"/workspace", "/tmp"}), tmpfs
        for path, opts in tmpfs.items():
            o = opts.split(",")
            assert "nosuid" in o and "nodev" in o, (path, opts)
            assert "size=%dm" % limits["disk_mb"] in o, (path, opts)
            assert "exec" not in o, (path, opts)  # Docker's tmpfs default is noexec
        assert hc["Memory"] == limits["memory_mb"] * mb, hc["Memory"]
        assert hc["MemorySwap"] == hc["Memory"], (hc["MemorySwap"], hc["Memory"])
        assert hc["NanoCpus"] == int(limits["cpus"] * 1e9), hc["NanoCpus"]
        assert hc["PidsLimit"] == limits["pids"], hc["PidsLimit"]
        ul = {u["Name"]: (u["Soft"], u["Hard"]) for u in hc["Ulimits"] or []}
        assert ul.get("nofile") == (1024, 1024), ul
        assert ul.get("fsize") == (limits["disk_mb"] * mb,) * 2, ul
        assert ul.get("core") == (0, 0), ul
        assert hc["Init"] is True
        assert hc["IpcMode"] == "private", hc["IpcMode"]
        assert hc["PidMode"] in ("", None), hc["PidMode"]
        assert hc["UTSMode"] in ("", None) and hc["UsernsMode"] in ("", None)
        assert hc["LogConfig"]["Type"] == "json-file", hc["LogConfig"]
        assert hc["LogConfig"]["Config"].get("max-size"), hc["LogConfig"]
        assert hc["NetworkMode"] == "none", hc["NetworkMode"]
        assert not hc.get("PortBindings") and not hc.get("PublishAllPorts")
        assert not hc.get("Devices") and not hc.get("DeviceCgroupRules")
        assert hc.get("RestartPolicy", {}).get("Name") in ("no", "", None), hc["RestartPolicy"]
        # Binds: the session's IPC directory, read-only, and with the loop
        # backend its workspace image's mount point, nosuid and nodev on the
        # host (a bind keeps the flags of its source).
        assert len(binds) in (1, 2), binds
        src, dst, mode = binds[0].split(":")
        assert src == os.path.join(h.d.state_dir, "s", s["id"]), binds
        assert dst == "/run/ci" and mode == "ro", binds
        mounts = doc["Mounts"]
        assert all("docker.sock" not in (m.get("Source") or "") for m in mounts), mounts
        want = ["/run/ci", "/workspace"] if loop_ws else ["/run/ci"]
        assert sorted(m["Destination"] for m in mounts if m["Type"] == "bind") == want, mounts
        assert all(m["RW"] is (m["Destination"] == "/workspace") for m in mounts
                   if m["Type"] == "bind"), mounts
        if loop_ws:
            wsrc, wdst, wmode = binds[1].split(":")
            assert wsrc == os.path.join(h.d.state_dir, "w", s["id"]), binds
            assert wdst == "/workspace" and wmode == "rw", binds
            with open("/proc/self/mountinfo") as f:
                (line,) = [x.split() for x in f if x.split()[4] == os.path.realpath(wsrc)]
            opts = line[5].split(",")
            assert "nosuid" in opts and "nodev" in opts and "noexec" in opts, line
            assert os.path.getsize(wsrc + ".img") == limits["disk_mb"] * mb
        # Docker's masked and read-only /proc paths are in place.
        assert "/proc/kcore" in (hc.get("MaskedPaths") or []), hc.get("MaskedPaths")
        assert "/proc/sys" in (hc.get("ReadonlyPaths") or []), hc.get("ReadonlyPaths")
        # And the session with network.allow: the internal network only.
    with h.victim(network={"allow": ["allowed.test:%d" % h.http.port]}) as s:
        hc = h.inspect(s["id"])["HostConfig"]
        assert hc["NetworkMode"].startswith("ci-egress-"), hc["NetworkMode"]
        nets = h.inspect(s["id"])["NetworkSettings"]["Networks"]
        assert list(nets) == [hc["NetworkMode"]], nets
        out = h.d.networks()
        assert len(out) == 1
        net = json.loads(subprocess.run(["docker", "network", "inspect", out[0]],
                                        capture_output=True, text=True, check=True,
                                        timeout=30).stdout)[0]
        assert net["Internal"] is True, net
        assert net["Options"].get("com.docker.network.bridge.enable_icc") == "false", net
    h.assert_daemon_fine()

"""A task's Dockerfile cannot act as host root (issue 39 point 1): every RUN step runs in a user namespace (its root is
host uid BuildIsolation.uid_base), with no_new_privs, podman's seccomp profile, the sandbox limits, runc's
pivot_root (no chroot escape), and only the build's egress proxy as network (env/buildrt.py, docs/env.md)."""

import json
import os
import secrets
import shutil
import threading
import time
from pathlib import Path

import pytest

from composer2_jax.env import buildrt
from composer2_jax.env import testing as envtest
from composer2_jax.env.images import ID_RANGE, BuildIsolation, ImageBuilder

ON_CI = os.environ.get("CI") == "true"

# What the RUN step tries, as a stranger's Dockerfile would (perl-base: minbase has it, python it has not). Every
# attempt records its result in /report.tsv (key TAB value, newlines and tabs escaped) instead of failing the step,
# so the image builds and the test reads the report from the exported layer.
ATTACK = r'''
use strict;
my ($secret, $marker) = @ARGV;
my %r;
sub slurp { my ($p) = @_; open(my $f, "<", $p) or return "ERR $!"; local $/; my $t = <$f>; close $f; return $t; }
sub put { my ($p) = @_; open(my $f, ">", $p) or return "ERR $!"; print $f "owned\n"; close $f; return "wrote"; }
$r{uid_map} = slurp("/proc/self/uid_map");
$r{status} = join("", grep { /^(NoNewPrivs|Seccomp|CapEff):/ } split(/^/, slurp("/proc/self/status")));
$r{read_secret} = slurp("/root/$secret");
$r{unshare_user} = system("unshare -U true 2>/dev/null") == 0 ? "ok" : "refused";
$r{mount} = system("mount -t tmpfs none /mnt 2>/dev/null") == 0 ? "ok" : "refused";
mkdir "/esc";
my $ok = chroot("/esc");
if ($ok) { chdir("..") for 1 .. 64; $ok = chroot("."); }
$r{chroot} = $ok ? "ok" : "ERR $!";
$r{escaped_secret} = slurp("/root/$secret");
$r{escaped_write} = put("/tmp/$marker");
$r{escaped_root} = join(",", sort glob("/*"));
$r{escaped_owned} = put("/owned-after-escape");
$0 = "c2probe-$marker";  # the host finds this process by its name and reads its ids
sleep 3;
open(my $out, ">", "/report.tsv") or die "report: $!";
for my $k (sort keys %r) { (my $v = $r{$k}) =~ s/\n/\\n/g; $v =~ s/\t/\\t/g; print $out "$k\t$v\n"; }
'''

DOCKERFILE = """FROM debian:bookworm
ARG SECRET
ARG MARKER
COPY attack.pl /attack.pl
RUN perl /attack.pl "$SECRET" "$MARKER" && touch /owned
"""


def _watch(name: str, seen: list[str], done: threading.Event) -> None:
    """Collect the host's view of the ids (the Uid: and Gid: lines) of every process called `name` until done."""
    while not done.is_set():
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode() == name:
                    status = Path(f"/proc/{pid}/status").read_text().splitlines()
                    seen.extend(line for line in status if line.startswith(("Uid:", "Gid:")))
            except (OSError, UnicodeDecodeError):
                pass
        time.sleep(0.2)


def _problem() -> str | None:
    missing = [b for b in ("podman", "debootstrap", "runc") if shutil.which(b) is None]
    return envtest.host_problem() or (f"{', '.join(missing)} not installed (tests/run.sh installs them)"
                                      if missing else None)


@pytest.fixture(scope="module")
def builder():
    problem = _problem()
    if problem is not None:
        if ON_CI:
            pytest.fail(f"CI=true but images cannot be built here: {problem}")
        pytest.skip(problem)
    b = ImageBuilder()
    yield b
    b.close()


def test_the_build_runtime_refuses_specs_that_reach_host_root_and_tightens_the_rest(tmp_path):
    policy = BuildIsolation().policy()
    good = {"linux": {"namespaces": [{"type": "user"}, {"type": "mount"}],
                      "uidMappings": [{"containerID": 0, "hostID": 300000, "size": 65536}],
                      "gidMappings": [{"containerID": 0, "hostID": 300000, "size": 65536}]},
            "process": {"rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1048576, "soft": 1048576}]}}
    buildrt.check_maps(good, policy["min_host_id"])
    no_userns = {"linux": {**good["linux"], "namespaces": [{"type": "mount"}]}}
    with pytest.raises(ValueError, match="no user namespace"):
        buildrt.check_maps(no_userns, policy["min_host_id"])
    root_map = json.loads(json.dumps(good))
    root_map["linux"]["gidMappings"] = [{"containerID": 0, "hostID": 0, "size": 1}]
    with pytest.raises(ValueError, match=r"gidMappings .* reach host ids below 300000"):
        buildrt.check_maps(root_map, policy["min_host_id"])
    spec = buildrt.tighten(json.loads(json.dumps(good)), policy)
    assert spec["process"]["noNewPrivileges"] is True
    assert {r["type"]: r["hard"] for r in spec["process"]["rlimits"]} == {
        "RLIMIT_NOFILE": policy["open_files"], "RLIMIT_FSIZE": policy["file_size_bytes"]}
    assert spec["linux"]["resources"] == {"memory": {"limit": policy["memory_bytes"]},
                                          "pids": {"limit": policy["pids"]}}
    with pytest.raises(ValueError, match="uid_base=1000"):
        BuildIsolation(uid_base=1000)
    with pytest.raises(ValueError, match="overlaps the sandboxes' id range"):
        ImageBuilder(cache_dir=tmp_path, isolation=BuildIsolation(uid_base=200_000 + 5))


def test_a_dockerfile_run_step_cannot_act_as_host_root(builder, tmp_path):
    """(a) read a file in host /root, (b) write host /tmp, (c) chroot(d); chdir('..') x n; chroot('.'), (d) the
    step's files are owned by an unprivileged host uid; mount and nested user namespaces are refused."""
    secret, marker = f"c2-build-secret-{secrets.token_hex(6)}", f"c2-build-marker-{secrets.token_hex(6)}"
    Path("/root", secret).write_text("host root's secret\n")
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(DOCKERFILE)
    (ctx / "attack.pl").write_text(ATTACK)
    seen: list[str] = []
    done = threading.Event()
    watcher = threading.Thread(target=_watch, args=(f"c2probe-{marker}", seen, done), daemon=True)
    watcher.start()
    try:
        image = builder.build(ctx, build_args={"SECRET": secret, "MARKER": marker})
    finally:
        done.set()
        os.unlink(f"/root/{secret}")
    watcher.join()
    assert not Path("/tmp", marker).exists(), "a RUN step wrote to the host's /tmp"
    top = Path(image.layer_root, image.layers[0])
    report = dict(line.split("\t", 1) for line in (top / "report.tsv").read_text().splitlines())
    report = {k: v.replace("\\n", "\n").replace("\\t", "\t") for k, v in report.items()}
    base = builder.isolation.uid_base
    assert report["uid_map"].split() == ["0", str(base), str(ID_RANGE)]  # root inside is host uid `base`
    assert "NoNewPrivs:\t1" in report["status"] and "Seccomp:\t2" in report["status"]
    assert report["read_secret"].startswith("ERR") and report["escaped_secret"].startswith("ERR")
    assert report["unshare_user"] == "refused" and report["mount"] == "refused"
    # chroot itself is allowed (Docker's default capability) but lands in the image: runc pivot_root'ed into it
    assert report["chroot"] == "ok" and "/attack.pl" in report["escaped_root"].split(",")
    assert report["escaped_write"] == "wrote" and (top / "tmp" / marker).is_file()  # the image's /tmp
    # (d) from the host: the step's process ran as host uid `base` (real, effective, saved, fs), and what it wrote is
    # image uid 0, exported into the sandboxes' range
    assert seen and all(line.split()[1:] == [str(base)] * 4 for line in seen), seen
    for name in ("owned", "owned-after-escape", "report.tsv"):
        assert os.lstat(top / name).st_uid == image.uid_base

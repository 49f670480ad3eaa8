"""What the VM escape checks share (tests/test_env_vm_adversarial.py: image VMs; tests/test_env_vm_workspace.py:
workspace VMs): a host canary, the shell helper, and the containment check run after every attack."""

import os
import secrets

import pytest


@pytest.fixture(scope="module")
def canary(tmp_path_factory):
    """(path, secret): a host file no guest may read or change."""
    path = tmp_path_factory.mktemp("host") / "canary.txt"
    secret = secrets.token_hex(16)
    path.write_text(secret)
    return str(path), secret


def disk_stamps(*paths: str) -> dict[str, tuple[int, int]]:
    """(mtime_ns, size) of the host disk files the VMs share, to compare after an attack."""
    return {path: (os.stat(path).st_mtime_ns, os.stat(path).st_size) for path in paths}


def sh(env, sid, command, **kw):
    """run_terminal_cmd observation."""
    return env.call(sid, "run_terminal_cmd", {"command": command, **kw})


def contained(env, attacker, bystander, canary, bystander_file: str):
    """The host canary and the shared disks (env.disks) are unchanged, the bystander VM still answers with its own
    file, and the attacker's VM is still the one live QEMU process it was."""
    path, secret = canary
    with open(path) as f:
        assert f.read() == secret
    for disk, stamp in env.disks.items():
        assert (os.stat(disk).st_mtime_ns, os.stat(disk).st_size) == stamp, f"{disk} changed"
    obs = sh(env, bystander, f"cat {bystander_file}")
    assert obs.ok and obs.fields["stdout"] == "bystander data"
    assert env.info(attacker)["alive"]

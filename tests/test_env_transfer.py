"""Copying a published tests/ folder into a sandbox: every kind of entry it may hold (modes, symlinks, empty files and
folders, hard links, large binaries split over several archives), into an image whose Python has no gzip module, and
failures that name the file.
"""

import base64
import hashlib
import io
import os
import tarfile

import pytest

from composer2_jax.env import EgressPolicy, Environment, SandboxConfig, transfer
from composer2_jax.env.images import ImageBuilder
from composer2_jax.env.sandbox import SandboxError
from composer2_jax.env.sandbox_config import Resources
from tests.test_env_images import ON_CI, PROBLEM, needs_images

BIG = 30 << 20


def _tests_folder(root):
    """A tests/ folder with one of everything a published task's may hold."""
    t = root / "tests"
    (t / "data" / "nested").mkdir(parents=True)
    (t / "empty-dir").mkdir()
    (t / "test.sh").write_text("#!/bin/bash\necho hi\n")
    os.chmod(t / "test.sh", 0o755)
    (t / "secret.txt").write_text("s\n")
    os.chmod(t / "secret.txt", 0o600)
    (t / "readonly.txt").write_text("r\n")
    os.chmod(t / "readonly.txt", 0o444)
    (t / "empty.txt").write_bytes(b"")
    (t / "data" / "nested" / "deep.json").write_text('{"a": 1}\n')
    (t / "data" / "big.bin").write_bytes(os.urandom(BIG))
    os.symlink("test.sh", t / "link-to-file")
    os.symlink("data/nested", t / "link-to-dir")
    os.symlink("/nonexistent/target", t / "dangling")
    os.link(t / "secret.txt", t / "hardlink.txt")
    os.chmod(t / "data" / "nested", 0o555)  # a read-only folder still receives its files
    return t


def _listing(tar_parts):
    """{name: (type, mode, size, linkname)} over base64 tar parts."""
    out = {}
    for part in tar_parts:
        with tarfile.open(fileobj=io.BytesIO(base64.b64decode(part)), mode="r:") as tf:
            for m in tf.getmembers():
                out[m.name] = (m.type, m.mode, m.size, m.linkname)
    return out


def test_pack_parts_keeps_every_entry_and_splits_large_folders(tmp_path):
    t = _tests_folder(tmp_path)
    one = transfer.pack_parts(t)
    assert len(one) == 1
    listing = _listing(one)
    assert listing["test.sh"][:3] == (tarfile.REGTYPE, 0o755, 20) and listing["secret.txt"][1] == 0o600
    assert listing["readonly.txt"][1] == 0o444 and listing["empty.txt"][2] == 0
    assert listing["link-to-file"] == (tarfile.SYMTYPE, 0o777, 0, "test.sh")
    assert listing["dangling"][3] == "/nonexistent/target" and listing["link-to-dir"][0] == tarfile.SYMTYPE
    assert listing["hardlink.txt"][:3] == (tarfile.REGTYPE, 0o600, 2)  # stored whole: parts unpack on their own
    assert listing["empty-dir"][0] == tarfile.DIRTYPE and listing["data/nested"][1] == 0o555
    assert base64.b64decode(one[0])[:2] != b"\x1f\x8b"  # not gzipped: nothing of gzip/zlib needed to unpack
    parts = transfer.pack_parts(t, part_bytes=20 << 20)
    assert len(parts) == 3 and _listing(parts) == listing  # big.bin travels alone
    with pytest.raises(transfer.TransferError, match=r"cannot copy data/big\.bin: 31457280 bytes; at most"):
        transfer.pack_parts(t, part_bytes=8 << 20)
    os.mkfifo(t / "pipe")
    with pytest.raises(transfer.TransferError, match="cannot copy pipe: not a regular file, directory or symlink"):
        transfer.pack_parts(t)
    assert "pipe" not in _listing(transfer.pack_parts(t, exclude=("pipe", "data")))


@pytest.fixture(scope="module")
def env():
    if PROBLEM is not None:
        if ON_CI:
            pytest.fail(f"CI=true but images cannot be built here: {PROBLEM}")
        pytest.skip(PROBLEM)
    e = Environment(config=SandboxConfig(image_pool_size=0))
    yield e
    e.shutdown()


@needs_images
def test_tests_folder_copies_into_an_image_whose_python_has_no_gzip(env, tmp_path, monkeypatch):
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM python:3.11-slim\nRUN rm -rf /usr/lib/python3.11/gzip.py "
                                    "/usr/lib/python3.11/__pycache__/gzip.* /usr/bin/gzip /bin/gzip\n")
    image = ImageBuilder().build(ctx)
    sid = env.fork(env.import_image(image, workdir="/app"), policy=EgressPolicy(),
                   resources=Resources(memory_bytes=1 << 30, storage_bytes=1 << 30))
    probe = env.exec(sid, "python3 -c 'import gzip' 2>&1; command -v gzip || echo no-gzip-binary", user="")
    assert "No module named 'gzip'" in probe["stdout"] and "no-gzip-binary" in probe["stdout"], probe
    t = _tests_folder(tmp_path)
    monkeypatch.setattr(transfer, "PART_BYTES", 20 << 20)  # three archives, as a folder past one RPC frame would be
    env.put_dir(sid, t, "/tests")
    r = env.exec(sid, "cd /tests && find . -mindepth 1 -printf '%P %y %m %s %l\\n' | sort && "
                      "sha256sum data/big.bin && cat link-to-dir/deep.json && ./test.sh && stat -c '%u:%g' test.sh",
                 user="")
    assert r["exit_code"] == 0, r
    lines = r["stdout"].splitlines()
    listing = {line.split()[0]: line.split()[1:] for line in lines if not line.startswith(("{", "hi", "0:"))
               and len(line.split()) >= 4}
    assert listing["test.sh"] == ["f", "755", "20"] and listing["secret.txt"] == ["f", "600", "2"]
    assert listing["readonly.txt"] == ["f", "444", "2"] and listing["empty.txt"] == ["f", "644", "0"]
    assert listing["empty-dir"][:2] == ["d", "755"] and listing["data/nested"][:2] == ["d", "555"]
    assert listing["link-to-file"][0] == "l" and listing["link-to-file"][-1] == "test.sh"
    assert listing["dangling"][-1] == "/nonexistent/target" and listing["link-to-dir"][-1] == "data/nested"
    assert listing["data/big.bin"][:3] == ["f", "644", str(BIG)] and listing["hardlink.txt"][:2] == ["f", "600"]
    digest = hashlib.sha256((t / "data" / "big.bin").read_bytes()).hexdigest()
    assert f"{digest}  data/big.bin" in lines and '{"a": 1}' in lines and "hi" in lines and "0:0" in lines
    # a gzipped payload (transfer.pack_dir) is decompressed by the guest before it enters the image
    small = tmp_path / "small"
    small.mkdir()
    (small / "f.txt").write_text("gz ok\n")
    env.put_archive(sid, transfer.pack_dir(small), "/gz", user="")
    assert env.exec(sid, "cat /gz/f.txt", user="")["stdout"] == "gz ok\n"
    # a member that cannot be written is named
    env.exec(sid, "mkdir -p /blocked && touch /blocked/data", user="")
    with pytest.raises(SandboxError, match=r"cannot write data/big\.bin under /blocked: NotADirectoryError"):
        env.put_dir(sid, t, "/blocked")
    env.close(sid)

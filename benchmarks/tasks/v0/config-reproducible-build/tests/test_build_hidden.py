import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import zipfile


def copy_repo(dst, reverse=False):
    """Copy build.py and src/ into dst, creating files in sorted or reverse order."""
    shutil.copy("build.py", dst)
    paths = []
    for root, dirs, names in os.walk("src"):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        paths += [os.path.join(root, n) for n in names if not n.endswith(".pyc")]
    for path in sorted(paths, reverse=reverse):
        os.makedirs(os.path.join(dst, os.path.dirname(path)), exist_ok=True)
        shutil.copy(path, os.path.join(dst, path))
    return dst


def build(d):
    r = subprocess.run([sys.executable, "build.py"], cwd=d, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(d, "dist", "app.zip"), "rb") as f:
        return f.read()


class HiddenBuildTest(unittest.TestCase):
    def setUp(self):
        self.a, self.b = tempfile.mkdtemp(), tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.a)
        self.addCleanup(shutil.rmtree, self.b)
        copy_repo(self.a)
        copy_repo(self.b, reverse=True)

    def test_identical_across_time_mtime_mode_and_order(self):
        first = build(self.a)
        for root, _, names in os.walk(os.path.join(self.b, "src")):
            for n in names:
                os.utime(os.path.join(root, n), (1_500_000_000, 1_500_000_000))
        os.chmod(os.path.join(self.b, "src", "app", "words.py"), 0o600)
        os.makedirs(os.path.join(self.b, "src", "app", "__pycache__"))
        with open(os.path.join(self.b, "src", "app", "__pycache__", "words.cpython-311.pyc"), "wb") as f:
            f.write(b"junk")
        time.sleep(1.1)
        second = build(self.b)
        self.assertEqual(hashlib.sha256(first).hexdigest(), hashlib.sha256(second).hexdigest())
        self.assertEqual(first, build(self.a))

    def test_contents(self):
        os.makedirs(os.path.join(self.a, "src", "app", "__pycache__"))
        open(os.path.join(self.a, "src", "app", "__pycache__", "x.pyc"), "wb").close()
        build(self.a)
        with zipfile.ZipFile(os.path.join(self.a, "dist", "app.zip")) as zf:
            names = sorted(zf.namelist())
            info = zf.read("app/BUILD_INFO").decode()
        self.assertEqual(names, ["app/BUILD_INFO", "app/__init__.py", "app/__main__.py", "app/data/words.txt",
                                 "app/words.py"])
        self.assertIn("version=2.3.0", info)
        self.assertRegex(info, r"sources=[0-9a-f]{64}")

    def test_hash_tracks_content_and_paths(self):
        def sources(d):
            build(d)
            with zipfile.ZipFile(os.path.join(d, "dist", "app.zip")) as zf:
                return [l for l in zf.read("app/BUILD_INFO").decode().splitlines() if l.startswith("sources=")][0]

        before = sources(self.a)
        with open(os.path.join(self.a, "src", "app", "data", "words.txt"), "a") as f:
            f.write("more\n")
        changed = sources(self.a)
        self.assertNotEqual(before, changed)
        os.rename(os.path.join(self.a, "src", "app", "data", "words.txt"),
                  os.path.join(self.a, "src", "app", "data", "words2.txt"))
        self.assertNotEqual(changed, sources(self.a))

    def test_artifact_runs(self):
        build(self.a)
        env = dict(os.environ, PYTHONPATH=os.path.join(self.a, "dist", "app.zip"))
        r = subprocess.run([sys.executable, "-m", "app"], capture_output=True, text=True, env=env, cwd=self.b)
        self.assertEqual((r.returncode, r.stdout), (0, "the of and\n"), r.stderr)


if __name__ == "__main__":
    unittest.main()

import os
import subprocess
import tempfile
import unittest

SCRIPT = os.path.abspath("bin/greeter")


def run(args, cwd, argv0=SCRIPT):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(["sh", argv0, *args], cwd=cwd, capture_output=True, text=True, env=env)


class HiddenEntrypointTest(unittest.TestCase):
    def test_version_from_elsewhere(self):
        with tempfile.TemporaryDirectory() as d:
            r = run(["--version"], d)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "greeter 1.4.2")

    def test_hello_from_repo_root_relative(self):
        r = run(["hello", "Bob"], os.getcwd(), argv0="bin/greeter")
        self.assertEqual((r.returncode, r.stdout), (0, "Hello, Bob!\n"), r.stderr)

    def test_through_symlink(self):
        with tempfile.TemporaryDirectory() as d:
            link = os.path.join(d, "g")
            os.symlink(SCRIPT, link)
            r = run(["hello", "Cy", "--shout"], d, argv0=link)
        self.assertEqual((r.returncode, r.stdout), (0, "HELLO, CY!\n"), r.stderr)

    def test_code_still_in_src(self):
        self.assertTrue(os.path.isfile("src/greeter/cli.py"))
        self.assertFalse(os.path.exists("greeter"))


if __name__ == "__main__":
    unittest.main()

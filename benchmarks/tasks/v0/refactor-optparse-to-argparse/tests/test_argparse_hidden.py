import json
import os
import subprocess
import sys
import tempfile
import unittest

TEXT_A = "the cat and the hat\nThe end\n"
TEXT_B = "one two two\n"


def run(*args, cwd=None):
    return subprocess.run([sys.executable, os.path.abspath("wordstat.py"), *args], capture_output=True, text=True,
                          cwd=cwd)


class HiddenCliTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp()
        for name, text in (("a.txt", TEXT_A), ("b.txt", TEXT_B)):
            with open(os.path.join(cls.dir, name), "w") as f:
                f.write(text)

    def out(self, *args):
        r = run(*args, cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_plain_and_total(self):
        self.assertEqual(self.out("a.txt"), "     2      7     28 a.txt\n")
        self.assertEqual(self.out("a.txt", "b.txt").splitlines()[-1], "           10        total")

    def test_top_short_and_long(self):
        want = "     2      7     28 a.txt\n            2 the\n            1 cat\n"
        self.assertEqual(self.out("-t", "2", "a.txt"), want)
        self.assertEqual(self.out("--top=2", "a.txt"), want)
        self.assertEqual(self.out("a.txt", "--top", "2"), want)

    def test_ignore_case_json(self):
        got = json.loads(self.out("-i", "-f", "json", "-t", "1", "a.txt"))
        self.assertEqual(got, {"a.txt": {"lines": 2, "words": 7, "chars": 28, "top": [["the", 3]]}})
        self.assertEqual(json.loads(self.out("--format", "json", "b.txt")), {"b.txt": {"lines": 1, "words": 3, "chars": 12}})

    def test_quiet_combined_flags(self):
        self.assertEqual(self.out("-qi", "a.txt", "b.txt"), "10\n")
        self.assertEqual(self.out("--quiet", "--ignore-case", "a.txt"), "7\n")

    def test_errors(self):
        for args in ([], ["-t", "x", "a.txt"], ["-f", "xml", "a.txt"], ["--bogus", "a.txt"], ["-t", "-1", "a.txt"]):
            r = run(*args, cwd=self.dir)
            self.assertNotEqual(r.returncode, 0, args)
            self.assertTrue(r.stderr.strip(), args)

    def test_help(self):
        r = run("--help", cwd=self.dir)
        self.assertEqual(r.returncode, 0)
        for opt in ("--top", "--ignore-case", "--format", "--quiet"):
            self.assertIn(opt, r.stdout)

    def test_no_optparse(self):
        for name in os.listdir("."):
            if name.endswith(".py"):
                self.assertNotIn("optparse", open(name).read(), name)
        self.assertIn("argparse", open("wordstat.py").read())

    def test_visible_tests_pass(self):
        r = subprocess.run([sys.executable, "-m", "unittest", "discover", "-s", "tests", "-t", "."],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])


if __name__ == "__main__":
    unittest.main()

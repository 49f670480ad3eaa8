import json
import os
import subprocess
import sys
import tempfile
import unittest


def todo(f, *args):
    r = subprocess.run([sys.executable, "-m", "todo", "--file", f, *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


class HiddenJsonTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.f = os.path.join(self.dir.name, "t.txt")
        for title in ("milk", 'say "hi"', "ünïcode"):
            todo(self.f, "add", title)
        todo(self.f, "done", "2")

    def tearDown(self):
        self.dir.cleanup()

    def test_json(self):
        self.assertEqual(json.loads(todo(self.f, "list", "--json")),
                         [{"id": 1, "title": "milk", "done": False}, {"id": 2, "title": 'say "hi"', "done": True},
                          {"id": 3, "title": "ünïcode", "done": False}])

    def test_json_pending(self):
        got = json.loads(todo(self.f, "list", "--pending", "--json"))
        self.assertEqual([i["id"] for i in got], [1, 3])
        self.assertIs(got[0]["done"], False)

    def test_json_empty(self):
        self.assertEqual(json.loads(todo(os.path.join(self.dir.name, "none.txt"), "list", "--json")), [])

    def test_text_unchanged(self):
        self.assertEqual(todo(self.f, "list"), '[ ] 1. milk\n[x] 2. say "hi"\n[ ] 3. ünïcode\n')
        self.assertEqual(todo(self.f, "list", "--pending"), "[ ] 1. milk\n[ ] 3. ünïcode\n")


if __name__ == "__main__":
    unittest.main()

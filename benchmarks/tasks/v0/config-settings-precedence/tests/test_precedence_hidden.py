import json
import os
import subprocess
import sys
import tempfile
import unittest

from app.settings import DEFAULTS, load


class HiddenPrecedenceTest(unittest.TestCase):
    def setUp(self):
        fd, self.cfg = tempfile.mkstemp(suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump({"port": 8000, "workers": 4, "debug": True, "host": "0.0.0.0", "unknown": 1}, f)

    def tearDown(self):
        os.unlink(self.cfg)

    def test_env_beats_file(self):
        s = load(self.cfg, environ={"APP_PORT": "9000", "APP_DEBUG": "off"})
        self.assertEqual((s["port"], s["debug"], s["workers"], s["host"]), (9000, False, 4, "0.0.0.0"))

    def test_overrides_beat_env(self):
        self.assertEqual(load(self.cfg, environ={"APP_PORT": "9000"}, overrides={"port": 7000})["port"], 7000)

    def test_types(self):
        env = {"APP_DEBUG": "FALSE", "APP_WORKERS": "8", "APP_ALLOWED_ORIGINS": "a.com, b.com"}
        s = load(None, environ=env)
        self.assertIs(s["debug"], False)
        self.assertEqual(s["workers"], 8)
        self.assertEqual(s["allowed_origins"], ["a.com", "b.com"])
        for text, want in (("Yes", True), ("0", False), ("on", True), ("no", False)):
            self.assertIs(load(None, environ={"APP_DEBUG": text})["debug"], want, text)

    def test_bad_values(self):
        with self.assertRaisesRegex(ValueError, "debug"):
            load(None, environ={"APP_DEBUG": "maybe"})
        with self.assertRaisesRegex(ValueError, "port"):
            load(None, environ={"APP_PORT": "eighty"})

    def test_unknown_keys_ignored(self):
        s = load(self.cfg, environ={"APP_COLOR": "red"}, overrides={"other": 1})
        self.assertEqual(set(s), set(DEFAULTS))

    def test_missing_file_and_cli(self):
        self.assertEqual(load("/nonexistent.json", environ={}), DEFAULTS)
        env = dict(os.environ, APP_PORT="9100")
        r = subprocess.run([sys.executable, "-m", "app"], capture_output=True, text=True, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["port"], 9100)


if __name__ == "__main__":
    unittest.main()

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest


class HiddenDefaultsTest(unittest.TestCase):
    def fresh_checkout(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        shutil.copytree("service", os.path.join(d, "service"))
        shutil.copytree("config", os.path.join(d, "config"))
        local = os.path.join(d, "config", "local.json")
        if os.path.exists(local):
            os.unlink(local)
        return d

    def test_check_passes_on_fresh_checkout(self):
        d = self.fresh_checkout()
        r = subprocess.run([sys.executable, "-m", "service", "check"], cwd=d, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        cfg = json.loads(r.stdout)
        self.assertEqual(cfg["server"]["port"], 8080)
        self.assertEqual(cfg["database"]["url"], "sqlite:///data/app.db")
        self.assertEqual(cfg["features"], ["search", "export"])
        self.assertIsInstance(cfg["server"]["timeout_s"], int)
        self.assertEqual(cfg["server"]["timeout_s"], 30)
        self.assertEqual(cfg["log_level"], "info")

    def test_schema_and_code_unchanged(self):
        schema = json.load(open("config/schema.json"))
        self.assertEqual(schema["properties"]["log_level"]["enum"], ["debug", "info", "warning", "error"])
        self.assertEqual(schema["properties"]["database"]["required"], ["url", "pool_size"])
        self.assertIn("TYPES = {", open("service/config.py").read())

    def test_local_override_still_works(self):
        d = self.fresh_checkout()
        with open(os.path.join(d, "config", "local.json"), "w") as f:
            json.dump({"server": {"port": 9999}, "log_level": "debug"}, f)
        r = subprocess.run([sys.executable, "-m", "service", "check"], cwd=d, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["server"]["port"], 9999)


if __name__ == "__main__":
    unittest.main()

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|WARNING) (service(\.worker)?): (.+)$")


class HiddenLoggingTest(unittest.TestCase):
    def run_service(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        for name in ("service", "logging.ini"):
            src = os.path.abspath(name)
            (shutil.copytree if os.path.isdir(src) else shutil.copy)(src, os.path.join(d, name))
        r = subprocess.run([sys.executable, "-m", "service"], cwd=d, capture_output=True, text=True, timeout=30)
        log = os.path.join(d, "logs", "service.log")
        return r, open(log).read().splitlines() if os.path.exists(log) else None

    def test_starts_and_logs_file(self):
        r, lines = self.run_service()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIsNotNone(lines)
        parsed = [LINE.match(line) for line in lines]
        self.assertTrue(all(parsed), lines)
        self.assertEqual([(m.group(1), m.group(2), m.group(4)) for m in parsed],
                         [("INFO", "service", "starting"), ("INFO", "service.worker", "processed 3 jobs"),
                          ("WARNING", "service.worker", "queue is almost full"), ("INFO", "service", "stopped")])

    def test_stderr_has_warnings_only(self):
        r, _ = self.run_service()
        self.assertEqual(r.stderr.strip().splitlines(), ["WARNING: queue is almost full"])

    def test_code_unchanged(self):
        worker = open("service/worker.py").read()
        self.assertIn('log.warning("queue is almost full")', worker)
        main = open("service/__main__.py").read()
        self.assertIn('logging.config.fileConfig("logging.ini", disable_existing_loggers=False)', main)


if __name__ == "__main__":
    unittest.main()

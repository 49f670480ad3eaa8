import csv
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

from userexport import User, to_csv

TRICKY = [
    User(1, "Ann Lee", "ann@example.com", "pro"),
    User(2, "Lopez, Maria", "maria@example.com", "team"),
    User(3, 'Dwayne "The Rock" J.', "rock@example.com", "free"),
    User(4, "Line\nBreak", "lb@example.com", "pro"),
    User(5, "Zoë, Ünal", "zu@example.com", "free"),
]


def parse(text):
    return list(csv.reader(io.StringIO(text)))


class HiddenExportTest(unittest.TestCase):
    def test_round_trip_of_tricky_names(self):
        rows = parse(to_csv(TRICKY))
        self.assertEqual(rows[0], ["id", "name", "email", "plan"])
        self.assertEqual(rows[1:], [[str(u.id), u.name, u.email, u.plan] for u in TRICKY])

    def test_every_row_has_four_columns(self):
        for row in parse(to_csv(TRICKY)):
            self.assertEqual(len(row), 4, row)

    def test_plain_rows_are_unquoted(self):
        lines = to_csv([User(7, "Bo Chen", "bo@example.com", "free")]).splitlines()
        self.assertEqual(lines[1], "7,Bo Chen,bo@example.com,free")

    def test_cli_writes_a_parseable_file(self):
        with tempfile.TemporaryDirectory() as d:
            src, out = os.path.join(d, "u.json"), os.path.join(d, "out.csv")
            with open(src, "w") as f:
                json.dump([{"id": u.id, "name": u.name, "email": u.email, "plan": u.plan} for u in TRICKY], f)
            run = subprocess.run([sys.executable, "-m", "userexport", src, out], capture_output=True, text=True)
            self.assertEqual(run.returncode, 0, run.stderr)
            with open(out, newline="", encoding="utf-8") as f:
                rows = list(csv.reader(f))
            self.assertEqual([r[1] for r in rows[1:]], [u.name for u in TRICKY])


if __name__ == "__main__":
    unittest.main()

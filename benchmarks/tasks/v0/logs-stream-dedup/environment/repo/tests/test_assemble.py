import unittest

from streamkit import assemble


class AssembleTest(unittest.TestCase):
    def test_in_order(self):
        events = [{"type": "start", "ts": 0, "session": "s"},
                  {"type": "chunk", "seq": 0, "ts": 10, "delta": "Hello"},
                  {"type": "chunk", "seq": 1, "ts": 25, "delta": " world"},
                  {"type": "end", "ts": 30, "chunks": 2}]
        self.assertEqual(assemble(events), "Hello world")


if __name__ == "__main__":
    unittest.main()

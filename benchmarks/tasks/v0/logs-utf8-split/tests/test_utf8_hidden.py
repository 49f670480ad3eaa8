import os
import random
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_captures  # noqa: E402

from streamclient import decode_chunks  # noqa: E402


class HiddenDecoderTest(unittest.TestCase):
    def test_character_split_across_chunks(self):
        data = "ok 🚀 größer 日本".encode()
        for cut in range(1, len(data)):
            self.assertEqual(decode_chunks([data[:cut], data[cut:]]), "ok 🚀 größer 日本", cut)

    def test_one_byte_chunks(self):
        data = "naïve 😀".encode()
        self.assertEqual(decode_chunks([data[i:i + 1] for i in range(len(data))]), "naïve 😀")

    def test_empty(self):
        self.assertEqual(decode_chunks([]), "")


class HiddenDetectorTest(unittest.TestCase):
    def test_detector_on_fresh_captures(self):
        import detect
        with tempfile.TemporaryDirectory() as d:
            labels = gen_captures.write_captures(d, seed=9001, count=250)
            wrong = [c for c, bad in labels.items() if bool(detect.is_affected(os.path.join(d, c + ".jsonl"))) != bad]
        self.assertGreater(sum(labels.values()), 10)
        self.assertLessEqual(len(wrong), 5, wrong[:10])


if __name__ == "__main__":
    unittest.main()

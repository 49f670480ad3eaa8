import unittest

from streamclient import decode_chunks


class DecoderTest(unittest.TestCase):
    def test_ascii(self):
        self.assertEqual(decode_chunks([b"Hel", b"lo"]), "Hello")

    def test_whole_characters(self):
        self.assertEqual(decode_chunks(["caf".encode(), "é!".encode()]), "café!")


if __name__ == "__main__":
    unittest.main()

import unittest

from hookops import signing


class SigningTest(unittest.TestCase):
    def test_round_trip_and_rotation(self):
        body = b'{"id":"evt_1"}'
        value = signing.header(["old", "new"], body, 1_700_000_000)
        self.assertEqual(signing.verify("new", body, value, now=1_700_000_100), 1_700_000_000)
        self.assertEqual(signing.verify("old", body, value, now=1_700_000_100), 1_700_000_000)
        with self.assertRaises(signing.SignatureError):
            signing.verify("other", body, value, now=1_700_000_100)

    def test_known_value(self):
        self.assertEqual(signing.sign("whsec", b"{}", 1),
                         "6ab13b5991724d5a0c7f02d7989ba3425b580e39d5b9a0a6258a7f5d0419173a")
        self.assertEqual(signing.sign(b"whsec", b"{}", 1.9), signing.sign("whsec", b"{}", 1))

    def test_tolerance_and_malformed(self):
        value = signing.header("s", b"x", 1000)
        with self.assertRaises(signing.SignatureError):
            signing.verify("s", b"x", value, now=1400)
        for bad in ("t=abc,v1=00", "v1=00", "t=5"):
            with self.assertRaises(signing.SignatureError):
                signing.parse(bad)


if __name__ == "__main__":
    unittest.main()

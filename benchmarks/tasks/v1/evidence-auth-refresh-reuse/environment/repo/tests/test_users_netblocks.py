import os
import unittest

from authops import netblocks, users

from tests.fixture import T0, build, iso


class UsersNetblocksTest(unittest.TestCase):
    def test_netblocks(self):
        self.assertEqual(netblocks.block("10.1.2.3"), "10.1.2.0/24")
        self.assertEqual(netblocks.block("2001:db8::1"), "2001:db8::/48")
        self.assertIsNone(netblocks.block("nope"))
        self.assertTrue(netblocks.same_block("10.1.2.3", "10.1.2.200"))
        self.assertFalse(netblocks.same_block("10.1.2.3", "10.1.3.3"))
        self.assertTrue(netblocks.same_block("10.1.2.3", "10.1.3.3", prefix=16))
        self.assertTrue(netblocks.is_private("192.168.1.1") and not netblocks.is_private("8.8.8.8"))

    def test_users(self):
        d = build()
        table = users.summary(d)
        self.assertEqual(table["u_1"], {"sessions": 1, "logins": 1, "installs": 1, "ended": {"revoked_reuse": 1}})
        self.assertEqual(table["u_2"]["ended"], {"user": 1})
        self.assertEqual(users.many_installs(table, 1), ["u_1"])
        with open(os.path.join(d, "auth", "a2-d0-h02.log"), "w") as f:
            f.write("%s a2 login fam=fam_a2 user=u_1 req=r9 method=password\n" % iso(T0 + 9600))
        (row,) = users.signed_in_again(d)
        self.assertEqual(row[:3], ("u_1", "fam_a", "revoked_reuse"))
        self.assertAlmostEqual(row[3], 599.99, places=3)


if __name__ == "__main__":
    unittest.main()

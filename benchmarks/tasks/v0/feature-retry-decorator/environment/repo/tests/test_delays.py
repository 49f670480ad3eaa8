import unittest

from resilience.retry import delays


class DelaysTest(unittest.TestCase):
    def test_delays(self):
        self.assertEqual(delays(4, 0.1, 2.0, 5.0), [0.1, 0.2, 0.4])
        self.assertEqual(delays(1, 0.1, 2.0, 5.0), [])


if __name__ == "__main__":
    unittest.main()

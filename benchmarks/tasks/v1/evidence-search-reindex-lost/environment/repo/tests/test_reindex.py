import unittest

from searchops import reindex

from tests.fixture import T0, build


class ReindexTest(unittest.TestCase):
    def test_runs(self):
        runs = reindex.runs(build())
        self.assertEqual([(r.index, r.source, r.outcome) for r in runs],
                         [("products-0413", "products-0412", "swapped"), ("products-0414", "products-0413", "aborted")])
        self.assertEqual(runs[0].duration, 120)
        self.assertEqual(runs[1].reason, "disk_watermark")
        self.assertEqual(runs[0].page_of("p_000321"), (T0 + 40, "p_000001", "p_000500"))
        self.assertIsNone(runs[0].page_of("p_000501"))
        self.assertTrue(runs[0].building(T0 + 100) and not runs[0].building(T0 + 125))
        self.assertAlmostEqual(reindex.pages_per_minute(runs[0]), 0.5)
        self.assertIsNone(reindex.pages_per_minute(reindex.Run("x", "y", T0)))

    def test_alias_history(self):
        self.assertEqual(reindex.alias_history(build()), [(T0 + 125, "products-0413")])


if __name__ == "__main__":
    unittest.main()

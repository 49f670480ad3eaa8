import unittest

from searchops import feeds

from tests.fixture import T0, build


class FeedsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = build()

    def test_changes_once(self):
        self.assertEqual([c["change"] for c in feeds.iter_changes(self.dir)], ["ch_a", "ch_b", "ch_c"])
        self.assertEqual(len(list(feeds.iter_changes(self.dir, dedup=False))), 4)
        self.assertEqual(feeds.changes_by_version(self.dir)[("p_000001", 3)]["change"], "ch_c")
        self.assertEqual([h[1] for h in feeds.history(self.dir)["p_000001"]], [2, 3])

    def test_indexer_lines(self):
        xs = list(feeds.iter_indexer(self.dir))
        self.assertEqual(sum(isinstance(x, feeds.Skip) for x in xs), 1)
        dual = [x for x in xs if isinstance(x, feeds.Write) and len(x.indexes) == 2]
        self.assertEqual([(x.doc, x.op) for x in dual], [("p_000001", "write"), ("p_000002", "delete")])
        self.assertIsNone(feeds.parse_indexer("%.3f ix1 hello\n" % T0))

    def test_answers(self):
        rows = list(feeds.iter_answers(self.dir))
        self.assertEqual(len(rows), 3)
        self.assertEqual(rows[0]["version"], 3)


if __name__ == "__main__":
    unittest.main()

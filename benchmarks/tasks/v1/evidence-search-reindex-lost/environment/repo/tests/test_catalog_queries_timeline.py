import unittest

from searchops import catalog, queries, timeline

from tests.fixture import T0, build


class CatalogQueriesTimelineTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = build()

    def test_changed_fields(self):
        self.assertEqual(catalog.changed_fields({"title": "a", "stock": 1}, {"title": "a", "stock": 2}), ["stock"])
        self.assertEqual(catalog.changed_fields({"title": "a"}, None), ["title"])
        self.assertEqual(catalog.changed_fields(None, {"b": 1, "a": 2}), ["a", "b"])
        self.assertEqual(catalog.field_churn(self.dir), {"title": 1})

    def test_row_problems(self):
        self.assertEqual(catalog.row_problems({"title": "Osk lamp", "price_cents": 1999, "stock": 3}), [])
        self.assertEqual(catalog.row_problems({"title": " ", "price_cents": 0, "stock": -1}),
                         ["empty title", "price out of range: 0", "negative stock"])
        self.assertEqual([b[0] for b in catalog.bad_rows(self.dir)], ["ch_a", "ch_c"])  # no prices in the fixture

    def test_queries(self):
        self.assertEqual(queries.top_queries(self.dir, 1), [("lamp", 2)])
        self.assertEqual(queries.per_node_hour(self.dir), {("s1", 0): 1, ("s2", 0): 2})
        self.assertEqual(queries.top_products(self.dir, 1), [("p_000001", 2)])

    def test_timeline(self):
        rows = timeline.of_product(self.dir, "p_000001")
        self.assertEqual(rows[0], (T0 + 10, "cdc", "upsert v2 (ch_a)"))
        self.assertIn((T0 + 40, "reindex", "page of products-0413 read (p_000001..p_000500)"), rows)
        self.assertIn((T0 + 200, "ix1", "skip v2 (older)"), rows)
        self.assertIn("alias moved", timeline.render(rows))


if __name__ == "__main__":
    unittest.main()

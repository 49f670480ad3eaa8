import unittest

from notes import NoteStore, Searcher


class HiddenSearchTest(unittest.TestCase):
    def setUp(self):
        self.store = NoteStore()
        self.a = self.store.add("Buy milk and eggs")
        self.b = self.store.add("Call the bank about the card")
        self.s = Searcher(self.store)

    def test_update_is_seen(self):
        self.assertEqual(self.s.search("milk"), [self.a])
        self.store.update(self.a, "Buy bread")
        self.assertEqual(self.s.search("milk"), [])
        self.assertEqual(self.s.search("bread"), [self.a])

    def test_delete_is_seen(self):
        self.assertEqual(self.s.search("bank"), [self.b])
        self.store.delete(self.b)
        self.assertEqual(self.s.search("bank"), [])

    def test_add_is_seen(self):
        self.assertEqual(self.s.search("card"), [self.b])
        c = self.store.add("New card arrived")
        self.assertEqual(self.s.search("card"), [self.b, c])

    def test_repeated_queries_hit_the_cache(self):
        for _ in range(5):
            self.s.search("milk eggs")
        self.assertEqual(self.s.stats(), {"hits": 4, "misses": 1})
        self.store.update(self.a, "milk eggs flour")
        self.assertEqual(self.s.search("milk eggs"), [self.a])
        self.s.search("milk eggs")
        self.assertEqual(self.s.stats(), {"hits": 5, "misses": 2})

    def test_results_are_copies(self):
        self.s.search("milk").append(99)
        self.assertEqual(self.s.search("milk"), [self.a])


if __name__ == "__main__":
    unittest.main()

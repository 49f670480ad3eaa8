import unittest

from notes import NoteStore, Searcher


class SearchTest(unittest.TestCase):
    def test_search_and_cache(self):
        store = NoteStore()
        a = store.add("Buy milk and eggs")
        store.add("Call the bank")
        s = Searcher(store)
        self.assertEqual(s.search("milk"), [a])
        self.assertEqual(s.search("MILK"), [a])
        self.assertEqual(s.stats(), {"hits": 1, "misses": 1})


if __name__ == "__main__":
    unittest.main()

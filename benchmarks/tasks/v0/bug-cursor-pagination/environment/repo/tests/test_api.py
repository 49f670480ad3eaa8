import unittest

from feed.api import list_feed
from feed.models import Post
from feed.store import PostStore


class ApiTest(unittest.TestCase):
    def test_two_pages(self):
        store = PostStore(Post(i, 1000 + i, f"p{i}") for i in range(5))
        first = list_feed(store, limit=3)
        self.assertEqual(first["items"], [0, 1, 2])
        second = list_feed(store, first["next"], limit=3)
        self.assertEqual(second, {"items": [3, 4], "next": None})


if __name__ == "__main__":
    unittest.main()

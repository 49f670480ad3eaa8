import random
import unittest

from feed.api import list_feed
from feed.models import Post
from feed.store import PostStore


def walk(store, limit):
    seen, cursor = [], None
    for _ in range(10000):
        page = list_feed(store, cursor, limit)
        seen += page["items"]
        cursor = page["next"]
        if cursor is None:
            return seen
        assert isinstance(cursor, str)
    raise AssertionError("paging never ended")


class HiddenFeedTest(unittest.TestCase):
    def test_bulk_import_same_second(self):
        store = PostStore(Post(i, 5000, "x") for i in range(1, 26))
        self.assertEqual(sorted(walk(store, 10)), list(range(1, 26)))

    def test_every_post_once_random(self):
        rng = random.Random(7)
        for trial in range(20):
            posts = [Post(i, rng.randint(0, 30), "x") for i in rng.sample(range(1000), 120)]
            store = PostStore(posts)
            for limit in (1, 3, 7, 50):
                got = walk(store, limit)
                self.assertEqual(len(got), len(set(got)), (trial, limit))
                self.assertEqual(set(got), {p.id for p in posts}, (trial, limit))

    def test_order_is_by_time(self):
        store = PostStore([Post(3, 10, "a"), Post(1, 20, "b"), Post(2, 10, "c")])
        got = walk(store, 1)
        created = {3: 10, 1: 20, 2: 10}
        self.assertEqual([created[i] for i in got], sorted(created[i] for i in got))

    def test_last_page_has_no_cursor(self):
        store = PostStore(Post(i, 1, "x") for i in range(4))
        first = list_feed(store, None, 4)
        self.assertEqual(len(first["items"]), 4)
        self.assertIsNone(first["next"])


if __name__ == "__main__":
    unittest.main()

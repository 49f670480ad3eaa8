import unittest

from tagging.models import Post
from tagging.service import DEFAULTS, bulk_create, create_post


class HiddenTagsTest(unittest.TestCase):
    def test_posts_do_not_share_tags(self):
        a, b = create_post("a"), create_post("b")
        a.add_tag("secret")
        self.assertEqual(b.tags, [])
        self.assertEqual(Post("c").tags, [])

    def test_given_list_is_copied(self):
        mine = ["x"]
        p = Post("p", mine)
        p.add_tag("y")
        self.assertEqual(mine, ["x"])
        self.assertEqual(p.tags, ["x", "y"])

    def test_bulk_calls_are_independent(self):
        opts = {"visibility": "private", "tag": "import-1"}
        bulk_create(["a"], opts)
        self.assertEqual(opts, {"visibility": "private", "tag": "import-1"})
        first = bulk_create(["a"])
        self.assertEqual((first[0].visibility, first[0].tags), ("public", []))
        bulk_create(["b"], {"tag": "t"})
        again = bulk_create(["c"])
        self.assertEqual(again[0].tags, [])
        self.assertEqual(DEFAULTS, {"visibility": "public"})

    def test_default_options_not_mutated(self):
        import inspect
        default = inspect.signature(bulk_create).parameters["options"].default
        bulk_create(["z"])
        self.assertIn(default, (None, {}, inspect.Parameter.empty))


if __name__ == "__main__":
    unittest.main()

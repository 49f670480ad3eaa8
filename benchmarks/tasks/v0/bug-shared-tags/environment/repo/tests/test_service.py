import unittest

from tagging.service import bulk_create, create_post


class ServiceTest(unittest.TestCase):
    def test_create_with_tags(self):
        p = create_post("hello", ["a"])
        self.assertEqual(p.add_tag(" B ").tags, ["a", "b"])

    def test_bulk(self):
        posts = bulk_create(["x", "y"], {"visibility": "private", "tag": "imported"})
        self.assertEqual([(p.visibility, p.tags) for p in posts], [("private", ["imported"])] * 2)


if __name__ == "__main__":
    unittest.main()

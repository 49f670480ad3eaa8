import unittest

from shop.orders import place_order
from shop.users import ValidationError, make_user


class ShopTest(unittest.TestCase):
    def test_user(self):
        self.assertEqual(make_user(" Ann ", "Ann@Example.com", "+44 (20) 7946-0958")["phone"], "+442079460958")
        with self.assertRaises(ValidationError):
            make_user("Ann", "not-an-email")

    def test_order(self):
        self.assertEqual(place_order(["pen"], "bo@example.org")["email"], "bo@example.org")
        with self.assertRaises(ValidationError):
            place_order(["pen"], "bo@example.org", "12")


if __name__ == "__main__":
    unittest.main()

import unittest

from billing import Usage, usage_of


class UsageTest(unittest.TestCase):
    def test_short_response(self):
        events = [{"type": "message_start", "request": "r", "usage": {"input_tokens": 12, "output_tokens": 1}},
                  {"type": "content_block_delta", "delta": {"text": "Hi"}},
                  {"type": "message_delta", "usage": {"output_tokens": 3}},
                  {"type": "message_stop"}]
        self.assertEqual(usage_of(events), Usage(12, 3))


if __name__ == "__main__":
    unittest.main()

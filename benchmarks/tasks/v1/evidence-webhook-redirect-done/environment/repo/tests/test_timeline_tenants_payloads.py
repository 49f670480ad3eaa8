import unittest

from hookops import payloads, tenants, timeline

from tests.fixture import T0, build


class TimelineTenantsPayloadsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = build()

    def test_timeline(self):
        rows = timeline.of_delivery(self.dir, "dl_e")
        self.assertEqual([s for _, s, _ in rows], ["journal", "w4", "w4", "journal"])
        self.assertIn("followed a 308", rows[2][2])
        self.assertEqual(timeline.deliveries_of_event(self.dir, "evt_c"), {"dl_c": "ep_2"})
        self.assertEqual(timeline.event(self.dir, "evt_a")["tenant"], "acme")
        self.assertIsNone(timeline.event(self.dir, "evt_zz"))
        self.assertIn("journal", timeline.render(rows))

    def test_tenants(self):
        table = tenants.summary(self.dir)
        row = table["acme"]
        self.assertEqual((row["events"], row["deliveries"], row["endpoints"]), (5, 5, 3))
        self.assertEqual((row["delivered"], row["dead"], row["failed"], row["within_sla"]), (3, 1, 1, 3))
        self.assertAlmostEqual(row["sla"], 0.6)
        self.assertEqual(tenants.worst(table, minimum=1)[0][0], "acme")
        self.assertEqual(tenants.worst(table), [])

    def test_payloads(self):
        good = {"id": "evt_1", "type": "invoice.paid", "tenant": "t", "created": T0, "api_version": "2023-10-16",
                "data": {"object": {"id": "inv_1", "object": "invoice"}}}
        self.assertEqual(payloads.problems(good), [])
        self.assertEqual(payloads.problems({"type": "paid", "data": {}})[-2:],
                         ["no data.object", "type without a resource: 'paid'"])
        self.assertEqual(payloads.sizes([good, good])["invoice.paid"][0], 2)
        red = payloads.redact({"customer": "cus_1", "note": "mail ann@example.com", "lines": [{"card": "4242"}]})
        self.assertEqual(red, {"customer": "***", "note": "mail <email>", "lines": [{"card": "***"}]})


if __name__ == "__main__":
    unittest.main()

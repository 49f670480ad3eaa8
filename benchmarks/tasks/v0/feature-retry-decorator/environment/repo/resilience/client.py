"""A client for the inventory service (uses resilience.retry once it exists)."""


class InventoryClient:
    def __init__(self, transport):
        self.transport = transport

    def stock(self, sku):
        return self.transport(f"/stock/{sku}")["count"]

#!/bin/bash
sed -i 's/item\["price"\] for item/item["quantity"] * item["price"] for item/' /app/inventory.py

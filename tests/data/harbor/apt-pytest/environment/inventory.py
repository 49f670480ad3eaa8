"""Stock valuation for the warehouse report."""
import json
import sys


def total_value(items):
    """Total value of the stock: the sum of quantity * unit price over the items."""
    return sum(item["price"] for item in items)


if __name__ == "__main__":
    items = json.load(open(sys.argv[1]))
    print(json.dumps({"total": total_value(items)}))

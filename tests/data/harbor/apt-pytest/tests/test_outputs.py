import json
import subprocess


def run(items, tmp_path):
    path = tmp_path / "stock.json"
    path.write_text(json.dumps(items))
    out = subprocess.run(["python3", "/app/inventory.py", str(path)], capture_output=True, text=True, check=True)
    total = subprocess.run(["jq", ".total"], input=out.stdout, capture_output=True, text=True, check=True)
    return float(total.stdout)


def test_quantities_count(tmp_path):
    assert run([{"quantity": 3, "price": 2.5}, {"quantity": 2, "price": 10}], tmp_path) == 27.5


def test_empty_stock(tmp_path):
    assert run([], tmp_path) == 0

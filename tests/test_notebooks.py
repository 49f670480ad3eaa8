"""Notebooks execute top to bottom (each in a fresh kernel, from its own folder); add yours to NOTEBOOKS."""

import pathlib

import nbclient
import nbformat
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = [
    "notebooks/length_penalty.ipynb",
    pytest.param("notebooks/mtp_ablation.ipynb", marks=pytest.mark.slow),  # trains two toy models (~100 s)
]


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_notebook_executes(path):
    nb_path = ROOT / path
    nb = nbformat.read(nb_path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(nb_path.parent)}})
    client.execute()  # raises CellExecutionError on the first failing cell (the notebooks assert their claims)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    assert any(c.outputs for c in nb.cells if c.cell_type == "code"), f"{path} produced no output"

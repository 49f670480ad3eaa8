"""Markers shared by the test files (one definition; under CI=true a skip is an error, tests/conftest.py)."""

import pytest

from composer2_jax.env import testing as envtest

# Tests that start real bubblewrap sandboxes: skipped only on a host without them (and then named why).
needs_sandbox = pytest.mark.skipif(envtest.host_problem() is not None, reason=f"no sandboxes: {envtest.host_problem()}")

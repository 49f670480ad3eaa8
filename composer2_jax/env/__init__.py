"""Sandboxed coding environments for RL rollouts and serving.

Sandboxes are bubblewrap process trees in fresh user/pid/mount/ipc/uts/net namespaces with an overlayfs
workspace (snapshot, copy-on-write fork, restore), per-command and per-sandbox limits, egress only through
a policy-enforcing HTTP(S) proxy, and a tool-call RPC whose JSON schemas are shared by training and serving.
See docs/env.md for the design.
"""

from composer2_jax.env.budget import DiskBudgetExceeded
from composer2_jax.env.client import EnvironmentClient
from composer2_jax.env.egress_policy import EgressPolicy
from composer2_jax.env.environment import Environment
from composer2_jax.env.observation import Observation
from composer2_jax.env.runtime import check_host
from composer2_jax.env.sandbox import SandboxError
from composer2_jax.env.sandbox_config import SandboxConfig, SandboxLimits
from composer2_jax.env.tool_schemas import TODO_STATUSES, TOOL_NAMES, tool_specs
from composer2_jax.env.vm import environment as _vm_backend  # noqa: F401  (registers the "vm" backend)

__all__ = [
           "TODO_STATUSES",
           "TOOL_NAMES",
           "DiskBudgetExceeded",
           "EgressPolicy",
           "Environment",
           "EnvironmentClient",
           "Observation",
           "SandboxConfig",
           "SandboxError",
           "SandboxLimits",
           "check_host",
           "tool_specs",
]

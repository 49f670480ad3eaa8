"""composer2_jax: reproduce, ablate and scale the training pipeline of an agentic coding model.

Continued pre-training of a Kimi-K2.5-class MoE (MLA attention, fine-grained experts, MTP), then
asynchronous RL on verifiable coding tasks in sandboxed environments. See README.md for the map.
"""

__version__ = "0.1.0"

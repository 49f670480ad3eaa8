from kv.store import Store

__all__ = ["Store"]

from billing.usage import Usage, usage_of

__all__ = ["Usage", "usage_of"]

from pathmatch.match import match

__all__ = ["match"]

from streamkit.assemble import assemble
from streamkit.io import read_events

__all__ = ["assemble", "read_events"]

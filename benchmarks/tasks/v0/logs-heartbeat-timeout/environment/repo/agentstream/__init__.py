from agentstream.client import replay
from agentstream.watchdog import Watchdog

__all__ = ["Watchdog", "replay"]

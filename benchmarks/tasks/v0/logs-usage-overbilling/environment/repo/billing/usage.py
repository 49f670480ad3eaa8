"""Token usage of one streamed response (docs/events.md)."""

import dataclasses
import json


@dataclasses.dataclass(frozen=True)
class Usage:
    input_tokens: int
    output_tokens: int


def read_events(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def usage_of(events):
    """Input tokens (from message_start) and output tokens of a response."""
    input_tokens = output_tokens = 0
    for event in events:
        if event["type"] == "message_start":
            input_tokens = event["usage"]["input_tokens"]
        elif event["type"] == "message_delta":
            output_tokens += event["usage"]["output_tokens"]
    return Usage(input_tokens, output_tokens)

"""Probes of logs-usage-overbilling: usage and charges of streamed responses and the detector's answers
(bench/verdict_runner.py; the logs come from the runner's setup.py)."""

import json


def probe_cumulative_deltas(ctx):
    billing = ctx.load("billing")
    events = [{"type": "message_start", "request": "r", "usage": {"input_tokens": 100, "output_tokens": 1}},
              {"type": "message_delta", "usage": {"output_tokens": 10}},
              {"type": "message_delta", "usage": {"output_tokens": 25}},
              {"type": "message_delta", "usage": {"output_tokens": 40}}, {"type": "message_stop"}]
    usage = billing.usage_of(events)
    return [usage == billing.Usage(100, 40), usage.input_tokens, usage.output_tokens,
            ctx.load("billing.pricing").charge_micros(usage)]


def probe_generated_responses(ctx):
    usage_of = ctx.load("billing").usage_of
    with open(ctx.fixture["responses"]) as f:
        return [usage_of(events).output_tokens for events in json.load(f)]


def probe_detector_on_fresh_logs(ctx):
    detect = ctx.load("detect")
    return [bool(detect.is_overbilled(path)) for path in ctx.fixture["logs"]]

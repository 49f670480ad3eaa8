"""Prices in micro-dollars per token."""

INPUT_PRICE = 3
OUTPUT_PRICE = 15


def charge_micros(usage):
    return usage.input_tokens * INPUT_PRICE + usage.output_tokens * OUTPUT_PRICE

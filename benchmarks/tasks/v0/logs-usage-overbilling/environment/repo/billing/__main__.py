import sys

from billing.pricing import charge_micros
from billing.usage import read_events, usage_of

usage = usage_of(read_events(sys.argv[1]))
print(f"input={usage.input_tokens} output={usage.output_tokens} charge=${charge_micros(usage) / 1e6:.6f}")

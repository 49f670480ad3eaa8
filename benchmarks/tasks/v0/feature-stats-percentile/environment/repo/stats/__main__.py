import sys

from stats.summary import summarize

values = [float(line) for line in sys.stdin if line.strip()]
for key, value in summarize(values).items():
    print(f"{key:>5} {value:g}")

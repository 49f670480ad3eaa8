"""A week of smart-meter data and the billing ingest's records, from a seed (stdlib only).

    python generate.py REPO     builds REPO from its pinned python-dateutil release and history (sdist_repo.py, a copy
                                of the suite's shared script next to this file: the release the billing team's
                                scripts are built on, then its billops/ tools as a commit), then writes
                                REPO/logs/ (seed 7, 900 meters: ≈ 1,000 files, ≈ 25 MB)

Three sources, joined by meter id and interval id:
  logs/meters/<meter>.csv            what the meter reported every 15 minutes: local time as the meter printed it,
                                     its cumulative kWh counter (a replaced meter restarts near 0)
  logs/ingest/ingest-dDAY.jsonl      the billing ingest's intervals: meter, interval id, UTC start/end, kWh
                                     (logged at least once: a line can repeat with the same interval id)
  logs/registry.json                 meter id -> zone, firmware

The ingest's bug (fixed server-side at a point of the week, in no repository): meters on old firmware print local
time without an offset; in zones that leave daylight saving time during the week the clock repeats an hour, and
before the fix the ingest recorded that repeated hour's intervals twice (new interval ids, the same spans and
energy). After the fix it merges them. Harmless anomalies: replaced meters (counter restarts), duplicated
ingest lines, missing readings, readings late by a few minutes, the repeated hour itself on fixed days or on new
firmware (which prints offsets), meters in zones without a clock change this week, old meters offline during the change.

The verifier's setup.py imports this file (a copy in tests/) to draw fresh weeks with other seeds and fix times;
`write_logs` returns the true labels (meter id -> billed twice for an hour); given a dict as `kinds`, it also fills in
the harmless anomaly kinds drawn ({kind: meters}) for benchmarks/evidence_stats.py.
"""

from __future__ import annotations

import json
import os
import random
import sys

START = 1_698_537_600  # 2023-10-29T00:00:00Z, the start of the week (a Sunday)
STEP = 900  # seconds between readings
READINGS = 7 * 96
ZONES = {"Europe/Berlin": (2, 1, 1_698_541_200), "Europe/London": (1, 0, 1_698_541_200),
         "America/New_York": (-4, -5, 1_699_164_000), "Asia/Tokyo": (9, 9, None), "UTC": (0, 0, None),
         "Australia/Sydney": (11, 11, None)}
# zone -> (offset hours before, after, UTC time the clocks go back or None)


def _local(ts: int, zone: str) -> tuple[str, int]:
    """The local wall time a meter prints for UTC ts, and the offset in force (hours)."""
    before, after, switch = ZONES[zone]
    off = before if switch is None or ts < switch else after
    t = ts + off * 3600
    days, rem = divmod(t - START, 86400)
    return "d%d %02d:%02d" % (days, rem // 3600, rem % 3600 // 60), off


def make_meter(rng: random.Random, mid: str, fixed_at: float) -> tuple[dict, bool]:
    """One meter's readings and ingest intervals, and whether the ingest billed an hour twice (the label)."""
    zone = rng.choices(list(ZONES), weights=(3, 2, 3, 1, 1, 3))[0]
    firmware = "1.%d" % rng.randint(2, 9) if rng.random() < 0.08 else "2.%d" % rng.randint(0, 4)
    old = firmware.startswith("1.")
    counter, rows, intervals = rng.uniform(0, 40000), [], []
    replaced_at = rng.randrange(READINGS) if rng.random() < 0.12 else None
    prev, prev_ts = None, None
    before, after, switch = ZONES[zone]
    twice = False
    gaps, lates, dups = rng.random() < 0.15, rng.random() < 0.1, rng.random() < 0.2
    met = set()  # the harmless anomaly kinds the meter shows (the ground truth evidence_stats.py counts)
    if replaced_at is not None:
        met.add("replaced_counter_restart")
    if switch is None:
        met.add("zone_without_clock_change")
    # old meters check for firmware at night: half of them are offline around the clock change
    night_off = old and switch is not None and rng.random() < 0.5
    for k in range(READINGS):
        ts = START + k * STEP
        if gaps and rng.random() < 0.03:  # a missing reading
            met.add("missing_reading")
            continue
        if night_off and switch - 4 * 3600 <= ts < switch + 2 * 3600:
            met.add("old_meter_offline_at_change")
            continue
        counter += rng.uniform(0.01, 0.6)
        if k == replaced_at:
            counter = rng.uniform(0, 0.5)
        value = round(counter, 3)
        late = rng.randint(0, 200) if lates and rng.random() < 0.2 else 0
        if late:
            met.add("reading_late")
        local, off = _local(ts + late, zone)
        rows.append("%s,%s,%.3f" % (local, "" if old else "%+03d:00" % off, value))
        if prev is not None:
            kwh = round(value - prev if value >= prev else value, 3)
            iid = "%012x" % rng.getrandbits(48)
            intervals.append({"meter": mid, "interval": iid, "start": prev_ts, "end": ts, "kwh": kwh})
            repeated = switch is not None and switch - 3600 <= prev_ts < switch and before != after
            if repeated and old and ts < fixed_at:  # the repeated local hour read as a second hour
                intervals.append({"meter": mid, "interval": "%012x" % rng.getrandbits(48), "start": prev_ts,
                                  "end": ts, "kwh": kwh})
                twice = True
            elif repeated:
                met.add("repeated_hour_billed_once")
        prev, prev_ts = value, ts
    for x in list(intervals):
        if dups and rng.random() < 0.01:  # at-least-once logging of ingest lines
            intervals.append(dict(x))
            met.add("duplicated_ingest_line")
    return {"zone": zone, "firmware": firmware, "rows": rows, "intervals": intervals, "kinds": met}, twice


def write_logs(folder: str, seed: int = 7, count: int = 900, fixed_at: float | None = None,
               kinds: dict | None = None) -> dict:
    """Write a week under folder/{meters,ingest,registry.json}; {meter id: billed an hour twice} (the labels).
    kinds: filled with the harmless anomaly kinds drawn (module docstring).

    fixed_at (UTC seconds): when the ingest fix went out; by default between the European and the American
    switch (Europe billed twice, America not) or after both."""
    rng = random.Random(seed)
    if fixed_at is None:
        fixed_at = rng.choice((1_698_900_000, 1_699_500_000))
    labels, registry, by_day = {}, {}, {}
    os.makedirs(os.path.join(folder, "meters"), exist_ok=True)
    os.makedirs(os.path.join(folder, "ingest"), exist_ok=True)
    for j in range(count):
        mid = "m%05d" % rng.randrange(100000) + chr(97 + j % 26) + "%03d" % j
        meter, labels[mid] = make_meter(rng, mid, fixed_at)
        registry[mid] = {"zone": meter["zone"], "firmware": meter["firmware"]}
        with open(os.path.join(folder, "meters", mid + ".csv"), "w") as f:
            f.write("local_time,utc_offset,kwh_counter\n" + "\n".join(meter["rows"]) + "\n")
        for x in meter["intervals"]:
            by_day.setdefault((x["end"] - START) // 86400, []).append(x)
        if kinds is not None:
            for name in meter["kinds"]:
                kinds[name] = kinds.get(name, 0) + 1
    for day, lines in sorted(by_day.items()):
        rng.shuffle(lines)
        with open(os.path.join(folder, "ingest", "ingest-d%d.jsonl" % day), "w") as f:
            f.writelines(json.dumps(x, separators=(",", ":")) + "\n" for x in lines)
    with open(os.path.join(folder, "registry.json"), "w") as f:
        json.dump(registry, f, indent=0, sort_keys=True)
    return labels


def _build(repo: str) -> None:
    """The pinned release and its history (the shared sdist_repo.py, a byte-identical copy next to this file)."""
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("sdist_repo", os.path.join(here, "sdist_repo.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.build(repo)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: generate.py REPO")
    _build(sys.argv[1])
    write_logs(os.path.join(sys.argv[1], "logs"))

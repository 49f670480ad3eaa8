"""Measured evidence statistics of suite v1's evidence tasks (issue #24 point 4), from each generator's own truth.

Run:      python -m benchmarks.tasks.evidence_stats                         (JSON lines: one per task and week)
          python -m benchmarks.tasks.evidence_stats --tasks auth-refresh    (only tasks whose name holds a filter)
          python -m benchmarks.tasks.evidence_stats --weeks shipped         (only the week shipped in the repository)
          python -m benchmarks.tasks.evidence_stats --markdown              (the table of docs/benchmark.md)
          python -m benchmarks.tasks.evidence_stats --from-jsonl ROWS --write  (that table from earlier JSON lines)
Hardware: any host, stdlib generators only; each week is written into a temporary folder and removed (the shipped
          weeks are 23–78 MB each). ≈ 10 min for the 19 tasks' shipped and scoring weeks on 2 cores.

Per evidence task (benchmarks/tasks/v1/evidence-*), two kinds of week, both from the task's generator:
  shipped   environment/generate.py's `write_logs(folder)` with its defaults: the week the build writes into the
            repository (the same seed as `python generate.py REPO`)
  scoring   tests/setup.py's WEEKS, drawn by tests/gen_evidence.py: the fresh weeks the verifier scores detectors on
For each: files, MB (10^6 bytes) and sources (top-level folders) written; the bug's prevalence (bug units / all units,
from the labels `write_logs` returns; the unit is the labels' key, named in UNITS); every harmless anomaly kind the
generator counts (its `kinds=` export: units touched by the kind, or — for a kind of lines — its lines over all
lines of that source) with its rate and its multiple of the bug's rate. Issue #24's band: prevalence 1–3 %, ≥ 3
kinds at 5–20× the bug's rate, 500–2,000 files, 20–200 MB, 2–3 sources.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
V1 = ROOT / "benchmarks" / "tasks" / "v1"

# The per-task differences. UNITS: what one label counts. SCORING: the write_logs keywords tests/setup.py's WEEKS
# tuples fill (seed, count, fix time) and the module constants it adds; tasks not named use FIXED_AT.
UNITS = {
    "evidence-auth-refresh-reuse": "session", "evidence-cdn-cross-tenant": "session",
    "evidence-charge-retry-double": "purchase", "evidence-checkpoint-restore-rollback": "job",
    "evidence-dns-stale-resurrect": "client", "evidence-export-cursor-skip": "export",
    "evidence-fulfil-before-commit": "order", "evidence-mail-deferred-wiped": "email",
    "evidence-meter-fallback-hour": "meter", "evidence-payment-spool-wiped": "order",
    "evidence-price-cache-refill": "order", "evidence-proration-downgrade-full": "invoice",
    "evidence-queue-revoked-offset": "message", "evidence-ratelimit-shared-bucket": "API key",
    "evidence-search-reindex-lost": "change", "evidence-sensor-bridge-wiped": "reading",
    "evidence-stream-resume-gap": "request", "evidence-transcode-shovel-wiped": "video",
    "evidence-webhook-redirect-done": "delivery",
}
FIXED_AT = (("seed", "count", "fixed_at"), {})
FRAC = (("seed", "count", "fixed_at_frac"), {})
SCORING = {
    "evidence-cdn-cross-tenant": FRAC, "evidence-charge-retry-double": FRAC, "evidence-ratelimit-shared-bucket": FRAC,
    "evidence-stream-resume-gap": FRAC,
    "evidence-checkpoint-restore-rollback": (FRAC[0], {"lines_per_run": "FRESH_LINES"}),
    "evidence-queue-revoked-offset": (FRAC[0], {"heartbeat_s": "FRESH_HEARTBEAT_S"}),
    "evidence-export-cursor-skip": (FIXED_AT[0], {"tenants": "FRESH_TENANTS"}),
}
DOC = ROOT / "docs" / "benchmark.md"
BEGIN, END = "<!-- evidence-stats:begin -->", "<!-- evidence-stats:end -->"
BAND = {"prevalence": (0.01, 0.03), "multiple": (5.0, 20.0), "kinds": 3, "files": (500, 2000), "mb": (20.0, 200.0),
        "sources": (2, 3)}


def tasks(filters: list[str] | None = None) -> list[str]:
    """The evidence tasks of v1 (sorted), those whose name holds one of filters when given."""
    names = sorted(p.name for p in V1.glob("evidence-*") if (p / "environment" / "generate.py").is_file())
    return [n for n in names if not filters or any(f in n for f in filters)]


def load_module(path: Path, name: str):
    """A task folder's script (generator, setup, detector) imported from its file as module `name`."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def weeks(task: str) -> list[tuple[str, Path, dict]]:
    """(week name, generator file, write_logs keywords) of a task: the shipped week, then the scoring weeks."""
    root = V1 / task
    out = [("shipped", root / "environment" / "generate.py", {})]
    setup = load_module(root / "tests" / "setup.py", f"setup_{task.replace('-', '_')}")
    names, extra = SCORING.get(task, FIXED_AT)
    for week, values in setup.WEEKS.items():
        kwargs = dict(zip(names, values))
        kwargs.update({k: getattr(setup, const) for k, const in extra.items()})
        out.append((week, root / "tests" / "gen_evidence.py", kwargs))
    return out


def volume(folder: Path) -> dict:
    """Files, MB and sources (top-level folders) written under folder."""
    files = [p for p in folder.rglob("*") if p.is_file()]
    return {"files": len(files), "mb": round(sum(p.stat().st_size for p in files) / 1e6, 1),
            "sources": sorted(p.name for p in folder.iterdir() if p.is_dir())}


def rates(labels: dict, kinds: dict) -> dict:
    """Prevalence of the bug over the labels and each kind's count, rate and multiple of it (the one measuring core).
    A kind is a count of label units, or (count, total, unit) for a kind of lines."""
    units, bug = len(labels), sum(1 for v in labels.values() if v)
    prevalence = bug / units if units else 0.0
    out = {}
    for name, value in sorted(kinds.items()):
        count, total, unit = value if isinstance(value, (tuple, list)) else (value, units, None)
        rate = count / total if total else 0.0
        row = {"count": count, "rate": round(rate, 5), "x": round(rate / prevalence, 1) if prevalence else None}
        if unit:
            row.update(total=total, unit=unit)
        out[name] = row
    lo, hi = BAND["multiple"]
    in_band = sorted(k for k, r in out.items() if r["x"] is not None and lo <= r["x"] <= hi)
    return {"units": units, "bug": bug, "prevalence": round(prevalence, 5), "kinds": out, "in_band": in_band}


def verdict(row: dict, volume_too: bool) -> list[str]:
    """What breaks issue #24's band (empty when the week holds it); volume only for the shipped week."""
    bad = []
    lo, hi = BAND["prevalence"]
    if not lo <= row["prevalence"] <= hi:
        bad.append("prevalence %.2f %%" % (100 * row["prevalence"]))
    if len(row["in_band"]) < BAND["kinds"]:
        bad.append("%d kinds in 5-20x" % len(row["in_band"]))
    if volume_too:
        for key in ("files", "mb"):
            lo, hi = BAND[key]
            if not lo <= row[key] <= hi:
                bad.append("%s %s" % (key, row[key]))
        lo, hi = BAND["sources"]
        if not lo <= len(row["sources"]) <= hi:
            bad.append("%d sources" % len(row["sources"]))
    return bad


def measure(task: str, week: str, generator: Path, kwargs: dict, scratch: str | None = None) -> dict:
    """Writes one week into a temporary folder (removed on return) and measures it."""
    gen = load_module(generator, f"gen_{task.replace('-', '_')}_{week}")
    folder = tempfile.mkdtemp(prefix="evstats-", dir=scratch)
    try:
        start = time.perf_counter()
        kinds: dict = {}
        labels = gen.write_logs(os.path.join(folder, "logs"), kinds=kinds, **kwargs)
        seconds = time.perf_counter() - start
        row = {"task": task, "week": week, "args": kwargs, "unit": UNITS[task]}
        row.update(volume(Path(folder) / "logs"))
        row.update(rates(labels, kinds))
        row["seconds"] = round(seconds, 1)
        row["breaks"] = verdict(row, volume_too=week == "shipped")
        return row
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _pct(x: float) -> str:
    return "%.2f %%" % (100 * x)


def markdown(rows: list[dict]) -> str:
    """One row per task: the shipped week's volume, prevalence and kinds, then the scoring weeks'."""
    by_task: dict[str, list[dict]] = {}
    for r in rows:
        by_task.setdefault(r["task"], []).append(r)
    out = ["| task (unit) | shipped week: files, MB, sources | bug prevalence, shipped (scoring weeks) | "
           "harmless kinds, × the bug's rate (shipped week; **in 5–20×**) | kinds in 5–20×, shipped (scoring) | "
           "holds the band |",
           "|---|---|---|---|---|---|"]
    for task, group in sorted(by_task.items()):
        ship = next((r for r in group if r["week"] == "shipped"), group[0])
        scoring = [r for r in group if r is not ship]

        def kind(name, r):
            text = "%s %s×" % (name.replace("_", " "), r["x"])
            return "**%s**" % text if name in ship["in_band"] else text
        kinds = ", ".join(kind(k, r) for k, r in sorted(ship["kinds"].items(), key=lambda kv: -(kv[1]["x"] or 0)))
        prev = "%d / %d = %s" % (ship["bug"], ship["units"], _pct(ship["prevalence"]))
        if scoring:
            prev += " (%s)" % ", ".join(_pct(r["prevalence"]) for r in scoring)
        band = "%d (%s)" % (len(ship["in_band"]), ", ".join(str(len(r["in_band"])) for r in scoring))
        breaks = sorted({"%s: %s" % (r["week"].replace("fresh_week_", "scoring "), b)
                         for r in group for b in r["breaks"]})
        out.append("| `%s` (%s) | %d, %.1f, %d (%s) | %s | %s | %s | %s |" % (
            task, ship["unit"], ship["files"], ship["mb"], len(ship["sources"]), ", ".join(ship["sources"]), prev,
            kinds, band, "yes" if not breaks else "no: " + "; ".join(breaks)))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", nargs="*", help="only tasks whose name holds one of these")
    p.add_argument("--weeks", choices=("all", "shipped", "scoring"), default="all")
    p.add_argument("--markdown", action="store_true", help="print the table for docs/benchmark.md at the end")
    p.add_argument("--write", action="store_true", help="rewrite the table between the markers of docs/benchmark.md")
    p.add_argument("--from-jsonl", help="make the table from a file of earlier JSON lines instead of measuring")
    p.add_argument("--scratch", help="folder for the temporary weeks (default: the system's)")
    args = p.parse_args(argv)
    if args.from_jsonl:
        rows = [json.loads(line) for line in Path(args.from_jsonl).read_text().splitlines() if line.strip()]
        names = set(tasks(args.tasks))
        rows = [r for r in rows if r["task"] in names]
    else:
        rows = []
        for task in tasks(args.tasks):
            for week, generator, kwargs in weeks(task):
                if args.weeks != "all" and (week == "shipped") != (args.weeks == "shipped"):
                    continue
                row = measure(task, week, generator, kwargs, args.scratch)
                rows.append(row)
                print(json.dumps(row), flush=True)
    if args.markdown:
        print(markdown(rows))
    if args.write:
        text = DOC.read_text()
        head, rest = text.split(BEGIN, 1)
        DOC.write_text(head + BEGIN + "\n" + markdown(rows) + "\n" + END + rest.split(END, 1)[1])
    return 1 if any(r["breaks"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

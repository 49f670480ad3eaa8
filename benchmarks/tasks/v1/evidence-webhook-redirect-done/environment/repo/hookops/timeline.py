"""One delivery's or one event's story across the exports (docs/runbook.md, "A customer says an event never
arrived"): the event, the journal's states and every worker's attempts, in time order."""

from hookops import feeds
from hookops.timefmt import format_iso


def event(log_dir, event_id):
    """The event's line, or None."""
    for e in feeds.iter_events(log_dir):
        if e["id"] == event_id:
            return e
    return None


def of_delivery(log_dir, delivery):
    """[(ts, source, text)] of the delivery: journal rows ("journal") and attempts ("WORKER"), in time order."""
    rows = [(r["at"], "journal", "%s after %d attempts" % (r["state"], r["attempts"]))
            for r in feeds.iter_journal(log_dir) if r["delivery"] == delivery]
    for a in feeds.iter_attempts(log_dir):
        if a.delivery == delivery:
            text = "try=%s %s -> %s %dms" % (a.try_, a.url, a.status, a.ms)
            if a.via:
                text += " (followed a %s)" % a.via
            rows.append((a.ts, a.worker, text))
    return sorted(rows)


def deliveries_of_event(log_dir, event_id):
    """{delivery: endpoint} of an event, from the journal."""
    return {r["delivery"]: r["endpoint"] for r in feeds.iter_journal(log_dir) if r["event"] == event_id}


def render(rows):
    return "\n".join("%s  %-8s %s" % (format_iso(ts), source, text) for ts, source, text in rows)

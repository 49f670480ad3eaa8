import logging

log = logging.getLogger("service.worker")


def run():
    log.debug("debug details")
    log.info("processed 3 jobs")
    log.warning("queue is almost full")

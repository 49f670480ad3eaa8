import logging
import logging.config
import os

from service.worker import run

os.makedirs("logs", exist_ok=True)
logging.config.fileConfig("logging.ini", disable_existing_loggers=False)
log = logging.getLogger("service")
log.info("starting")
run()
log.info("stopped")

"""Probes of bug-config-equals: what the settings parser returns (bench/verdict_runner.py judges the values)."""

import os
import re

URL = "postgres://svc:pw@db/billing?sslmode=require&application_name=billing"
TAIL = "sslmode=require&application_name=billing"


def probe_value_with_equals(ctx):
    return ctx.load("app.config").parse(f"database_url = {URL}\n")["database_url"]


def probe_value_with_hash_and_equals(ctx):
    return ctx.load("app.config").parse("token = a=b#c==\n")["token"]


def probe_empty_value_and_case(ctx):
    return ctx.load("app.config").parse("Empty =\nKEY= x = y \n")


def probe_error_names_line(ctx):
    config = ctx.load("app.config")
    message = ctx.message(config.ConfigError, config.parse, "a = 1\nnot a setting\n")
    found = re.search(r"line \d+", message or "")
    return found.group() if found else None


def probe_repository_settings(ctx):
    os.chdir(ctx.workspace)
    url = ctx.load("app.config").load("settings.conf")["database_url"]
    return url[-len(TAIL):]

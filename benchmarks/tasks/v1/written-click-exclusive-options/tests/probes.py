"""Probes of written-click-exclusive-options: what the workspace's click answers (bench/verdict_runner.py).

Fail-to-pass: options declared exclusive (`exclusive_with`, from the history's groundwork commit) refused together
on the command line, by the rules of docs/options.rst "Mutually Exclusive Options" and the changelog: both ways,
only command-line values, command-line order in the message, eager options and conversion errors first, an
exported ExclusiveOptionsError, nothing raised when parsing resiliently, creation-time TypeError for names that are
not other options, the help text, shell completion, the info dict. Pass-to-pass: commands without exclusive options
and the rest of click's parsing, help and completion as click 8.1.7 answered them.
"""

import sys


def _click(ctx):
    root = ctx.path("src")
    if root not in sys.path:
        sys.path.append(root)  # after the standard library: the workspace shadows nothing
    return ctx.load("click")


def _run(ctx, cli, args, **kw):
    testing = ctx.load("click.testing")
    result = testing.CliRunner(mix_stderr=True).invoke(cli, args, **kw)
    return [result.exit_code, result.output]


def _report(click, **extra):
    @click.command()
    @click.option("--json", "as_json", is_flag=True, help="Print JSON.")
    @click.option("-c", "--csv", "as_csv", is_flag=True, help="Print CSV.", **extra)
    @click.option("--xml", "as_xml", is_flag=True, envvar="REPORT_XML", help="Print XML.")
    @click.option("--limit", default=10, show_default=True)
    def report(as_json, as_csv, as_xml, limit):
        click.echo(f"json={as_json} csv={as_csv} xml={as_xml} limit={limit}")

    return report


def _words(ctx, cli, args, incomplete):
    comp = ctx.load("click.shell_completion").ShellComplete(cli, {}, "cli", "_CLI_COMPLETE")
    return [c.value for c in comp.get_completions(args, incomplete)]


def probe_conflict_both_ways(ctx):
    click = _click(ctx)
    cli = _report(click, exclusive_with="as_json")
    return [_run(ctx, cli, ["--csv", "--json"]), _run(ctx, cli, ["--json", "-c"])]


def probe_conflict_between_value_and_flag(ctx):
    click = _click(ctx)
    cli = _report(click, exclusive_with=["as_json", "as_xml"])
    return [_run(ctx, cli, ["-c", "--limit", "3", "--xml"]), _run(ctx, cli, ["--xml", "--limit=4", "--csv"])]


def probe_first_conflict_in_command_line_order(ctx):
    click = _click(ctx)
    cli = _report(click, exclusive_with=["as_json", "as_xml"])
    return [_run(ctx, cli, ["--xml", "--json", "--csv"]), _run(ctx, cli, ["--json", "--xml", "-c", "--json"])]


def probe_no_conflict_without_both(ctx):
    click = _click(ctx)
    cli = _report(click, exclusive_with=["as_json", "as_xml"])
    return [_run(ctx, cli, args) for args in (["--csv"], ["--json", "--xml"], ["--csv", "--csv"], ["--limit", "2"])]


def probe_only_command_line_counts(ctx):
    click = _click(ctx)
    cli = _report(click, exclusive_with=["as_json", "as_xml"])
    return [_run(ctx, cli, ["--csv"], env={"REPORT_XML": "1"}),
            _run(ctx, cli, ["--csv"], default_map={"as_json": True}),
            _run(ctx, cli, ["--xml"], default_map={"as_csv": True})]


def probe_error_class(ctx):
    click = _click(ctx)
    cli = _report(click, exclusive_with="as_json")
    try:
        cli.main(["--json", "--limit", "5", "--csv"], standalone_mode=False)
    except click.UsageError as e:
        return [type(e).__name__, type(e) is getattr(click, "ExclusiveOptionsError", None), e.exit_code,
                e.format_message(), getattr(getattr(e, "param", None), "name", None),
                getattr(getattr(e, "other", None), "name", None), e.ctx is not None and e.ctx.command is cli]
    return "no error"


def probe_error_is_exported(ctx):
    click = _click(ctx)
    exc = getattr(click, "ExclusiveOptionsError", None)
    return [exc is not None and issubclass(exc, click.UsageError),
            exc is getattr(ctx.load("click.exceptions"), "ExclusiveOptionsError", None)]


def probe_help_lists_partners(ctx):
    click = _click(ctx)
    return _run(ctx, _report(click, exclusive_with=["as_json", "as_xml"]), ["--help"])


def probe_help_after_other_extras(ctx):
    click = _click(ctx)

    @click.command()
    @click.option("--a", default=1, show_default=True, required=True, help="A.")
    @click.option("--b", exclusive_with=["a"], envvar="B", show_envvar=True)
    @click.option("-c", "--cc", exclusive_with="a")
    def cli(a, b, cc):
        pass

    return _run(ctx, cli, ["--help"])


def probe_eager_and_conversion_first(ctx):
    click = _click(ctx)
    cli = _report(click, exclusive_with="as_json")
    return [_run(ctx, cli, ["--csv", "--json", "--help"])[0],
            _run(ctx, cli, ["--limit", "x", "--csv", "--json"]),
            _run(ctx, cli, ["--csv", "--json", "--limit", "y"])]


def probe_missing_required_first(ctx):
    click = _click(ctx)

    @click.command()
    @click.option("--all", "all_", is_flag=True)
    @click.option("--name", exclusive_with="all_")
    @click.option("--region", required=True)
    def cli(all_, name, region):
        click.echo(f"{all_} {name} {region}")

    return [_run(ctx, cli, ["--all", "--name", "x"]), _run(ctx, cli, ["--all", "--name", "x", "--region", "eu"]),
            _run(ctx, cli, ["--region", "eu", "--name", "x"])]


def probe_resilient_parsing(ctx):
    click = _click(ctx)
    cli = _report(click, exclusive_with="as_json")
    try:
        sub = cli.make_context("report", ["--csv", "--json"], resilient_parsing=True)
    except Exception as e:  # noqa: BLE001 - the answer is what was raised
        return type(e).__name__
    return sorted(k for k, v in sub.params.items() if v is True)


def probe_completion_hides_partners(ctx):
    click = _click(ctx)
    cli = _report(click, exclusive_with="as_json")
    return [_words(ctx, cli, [], "-"), _words(ctx, cli, ["--json"], "-"), _words(ctx, cli, ["-c"], "--"),
            _words(ctx, cli, ["-c", "--json"], "--"), _words(ctx, cli, ["--xml"], "--")]


def probe_completion_ignores_defaults(ctx):
    click = _click(ctx)
    cli = click.Command("cli", context_settings={"default_map": {"as_json": True}}, params=[
        click.Option(["--json", "as_json"], is_flag=True),
        click.Option(["--csv", "as_csv"], is_flag=True, exclusive_with="as_json")])
    return _words(ctx, cli, [], "--")


def probe_bad_names_refused(ctx):
    click = _click(ctx)
    out = []
    for name in ("as_yaml", "limit_", "as_json"):
        try:
            _report(click, exclusive_with=name)
            out.append("created")
        except TypeError:
            out.append("TypeError")
    try:
        click.Command("cli", params=[click.Argument(["path"], required=False),
                                     click.Option(["--all"], is_flag=True, exclusive_with="path")])
        out.append("created")
    except TypeError:
        out.append("TypeError")
    return out


def probe_subcommand_conflict(ctx):
    click = _click(ctx)

    @click.group()
    @click.option("--quiet", is_flag=True)
    def cli(quiet):
        pass

    @cli.command()
    @click.option("--all", "all_", is_flag=True)
    @click.option("-t", "--tag", multiple=True, exclusive_with="all_")
    def sync(all_, tag):
        click.echo(f"all={all_} tag={list(tag)}")

    return [_run(ctx, cli, ["--quiet", "sync", "-t", "a", "--tag", "b", "--all"]),
            _run(ctx, cli, ["sync", "-t", "a", "-t", "b"]), _run(ctx, cli, ["sync", "--all"])]


def probe_secondary_flag(ctx):
    click = _click(ctx)

    @click.command()
    @click.option("--shout/--no-shout", default=False)
    @click.option("--quiet", is_flag=True, exclusive_with="shout")
    def cli(shout, quiet):
        click.echo(f"{shout} {quiet}")

    return [_run(ctx, cli, ["--no-shout", "--quiet"])[0], _run(ctx, cli, ["--quiet", "--shout"])[0],
            _run(ctx, cli, ["--quiet"])]


def probe_info_dict(ctx):
    click = _click(ctx)
    cli = _report(click, exclusive_with=["as_json", "as_xml"])
    info = cli.to_info_dict(click.Context(cli))
    return [[p.get("exclusive_with", "absent") for p in info["params"]], sorted(info["params"][1])]


def probe_attribute_normalised(ctx):
    click = _click(ctx)
    return [list(click.Option(["--x"], exclusive_with=v).exclusive_with) for v in (None, "a", ["a", "b"], ("c",))]


def probe_plain_commands(ctx):
    click = _click(ctx)

    @click.command()
    @click.option("--name", required=True)
    @click.option("-v", "--verbose", count=True)
    @click.option("--color/--no-color", default=True, show_default=True)
    @click.argument("files", nargs=-1)
    def cli(name, verbose, color, files):
        click.echo(f"{name} {verbose} {color} {list(files)}")

    return [_run(ctx, cli, ["--name", "n", "-vv", "a", "b"]), _run(ctx, cli, ["a"]), _run(ctx, cli, ["--help"]),
            _run(ctx, cli, ["--name", "n", "--nam", "m"]), _words(ctx, cli, ["--name", "n"], "-")]


def probe_version(ctx):
    return _click(ctx).__version__

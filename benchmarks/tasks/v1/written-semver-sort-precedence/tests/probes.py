"""Probes of written-semver-sort-precedence: the order semver's sort helpers and `pysemver sort` give
(bench/verdict_runner.py). Fail-to-pass: precedence (a prerelease before its release, numeric identifiers as
numbers, numbers before words, longer lists after their prefix). Pass-to-pass: the feature's documented behaviour
that already worked (releases, reverse, short forms, stable order of equal versions) and the rest of the API."""

import random
import sys


def _semver(ctx):
    src = ctx.path("src")
    if src not in sys.path:
        sys.path.append(src)
    return ctx.load("semver")


def _sorted(ctx, versions, **kw):
    return [str(v) for v in _semver(ctx).sort_versions(versions, **kw)]


def _cli(ctx, *args):
    r = ctx.run([sys.executable, "-I", "-c", "import sys; sys.path.append('src'); from semver.cli import main; "
                 "sys.exit(main(sys.argv[1:]))", "sort", *args])
    return [r["returncode"], r["stdout"]]


def probe_release_after_its_prereleases(ctx):
    return _sorted(ctx, ["1.0.0", "1.0.0-rc.1", "0.9.0", "1.0.0-beta"])


def probe_numeric_identifiers(ctx):
    return _sorted(ctx, ["2.0.0-rc.10", "2.0.0-rc.9", "2.0.0-rc.1", "2.0.0-rc.2"])


def probe_spec_example(ctx):
    spec = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11",
            "1.0.0-rc.1", "1.0.0"]
    return [_sorted(ctx, list(reversed(spec))), _sorted(ctx, spec, reverse=True)]


def probe_numbers_before_words(ctx):
    return _sorted(ctx, ["1.0.0-alpha", "1.0.0-1", "1.0.0-beta", "1.0.0-2", "1.0.0-10"])


def probe_longer_after_prefix(ctx):
    return _sorted(ctx, ["1.0.0-alpha.1.2", "1.0.0-alpha", "1.0.0-alpha.1"])


def probe_build_metadata_ignored_stable(ctx):
    return _sorted(ctx, ["1.0.0+b2", "1.0.0-rc.1+z", "1.0.0+b1", "1.0.0-rc.1+a"])


def probe_latest_release(ctx):
    latest = _semver(ctx).latest
    return [str(latest(["1.0.0", "1.1.0-rc.1", "0.9.0"])), str(latest(["2.0.0-rc.1", "1.9.9"]))]


def probe_latest_with_prereleases(ctx):
    latest = _semver(ctx).latest
    return [str(latest(["1.0.0-rc.1", "1.0.0"], include_prereleases=True)),
            str(latest(["3.1.0-rc.9", "3.1.0-rc.10", "3.0.5"], include_prereleases=True)),
            latest([], include_prereleases=True)]


def probe_latest_among_releases_only(ctx):
    return [str(_semver(ctx).latest(["1.2.0", "1.10.0", "1.9.0", "1.10.0-rc.1"]))]


def probe_releases_unchanged(ctx):
    return [_sorted(ctx, ["1.0.1", "1.0.0", "0.9.0", "1.10.0", "1.2.0"]),
            _sorted(ctx, ["1", "1.2"], optional_minor_and_patch=True)]


def probe_mixed_objects_reverse(ctx):
    Version = _semver(ctx).Version
    return _sorted(ctx, [Version(1, 2, 3, "rc.2"), "1.2.3", Version(1, 2, 3, "rc.11"), "0.1.0"], reverse=True)


def probe_random_lists(ctx):
    rng, out = random.Random(11), []
    parts = ["alpha", "beta", "rc", "0", "1", "2", "9", "10", "x-y", "a1"]
    for _ in range(40):
        versions = ["%d.%d.%d%s%s" % (rng.randint(0, 2), rng.randint(0, 2), rng.randint(0, 2),
                                      "" if rng.random() < 0.3 else "-" + ".".join(
                                          rng.choice(parts) for _ in range(rng.randint(1, 3))),
                                      "" if rng.random() < 0.7 else "+b%d" % rng.randint(0, 9))
                    for _ in range(rng.randint(2, 30))]
        out.append(_sorted(ctx, versions))
    return out


def probe_cli_sort(ctx):
    return _cli(ctx, "1.0.0", "1.0.0-rc.2", "1.0.0-rc.10", "0.9.0")


def probe_cli_latest(ctx):
    return [_cli(ctx, "--latest", "1.0.0", "1.0.0-rc.1"), _cli(ctx, "--latest", "--prereleases", "1.1.0-rc.1",
                                                                    "1.1.0-rc.10", "1.0.0")]


def probe_cli_reverse(ctx):
    return _cli(ctx, "--reverse", "1.0.0-alpha", "1.0.0", "1.0.0-alpha.1")


def probe_compare_unchanged(ctx):
    Version = _semver(ctx).Version
    return [Version.parse("1.0.0-rc.10").compare("1.0.0-rc.9"), Version.parse("1.0.0").compare("1.0.0-rc.1"),
            str(max(Version.parse(v) for v in ["1.0.0-rc.1", "1.0.0", "0.9.0"]))]


def probe_parse_errors_unchanged(ctx):
    return [ctx.message(ValueError, _semver(ctx).sort_versions, ["1.0.0", "bad"]),
            _cli(ctx, "1.0.0", "nope")[0]]

"""Probes of real-semver-subclass-replace: what the workspace's semver (src/ layout) returns (bench/verdict_runner.py).

Fail-to-pass: replace() on a subclass, the plain dict form. Pass-to-pass: parsing, bumping, comparing, the error
of an unknown part, the command line, each as semver 3.0.1 already did it.
"""

import sys


def _semver(ctx):
    """The workspace's semver package (src/ appended after the standard library, so it shadows nothing)."""
    src = ctx.path("src")
    if src not in sys.path:
        sys.path.append(src)
    return ctx.load("semver")


def _prefixed(ctx):
    """A subclass that reads and writes a "v" prefix, as users of the library write one."""
    Version = _semver(ctx).Version

    class VTag(Version):
        @classmethod
        def parse(cls, version, optional_minor_and_patch=False):
            if version[:1] not in ("v", "V"):
                raise ValueError("%r: expected a leading v" % version)
            return super().parse(version[1:], optional_minor_and_patch=optional_minor_and_patch)

        def __str__(self):
            return "v" + super().__str__()

        def label(self):
            return "release " + str(self)

    return VTag


def probe_replace_prerelease_subclass(ctx):
    return str(_prefixed(ctx).parse("v1.1.0").replace(prerelease="dev.0"))


def probe_replace_keeps_type_and_methods(ctx):
    v = _prefixed(ctx).parse("v2.3.4").replace(major=7, build="b.9")
    return [type(v).__name__, v.label(), v.to_tuple()]


def probe_replace_chain_subclass(ctx):
    v = _prefixed(ctx).parse("v0.9.1")
    return [str(v.replace(minor=10).replace(patch=0)), str(v.replace())]


def probe_replace_short_form_subclass(ctx):
    return str(_prefixed(ctx).parse("v3", optional_minor_and_patch=True).replace(minor=2, prerelease="rc.1"))


def probe_next_version_after_prerelease_subclass(ctx):
    """next_version on a prerelease goes through replace()."""
    v = _prefixed(ctx).parse("v1.2.0-rc.3")
    return [str(v.next_version("minor")), type(v.next_version("patch")).__name__]


def probe_replace_base_class(ctx):
    v = _semver(ctx).Version.parse("1.2.3-pre.2+build.4").replace(major=2, prerelease=None)
    return [type(v).__name__, str(v)]


def probe_replace_unknown_part(ctx):
    v = _semver(ctx).Version.parse("1.2.3")
    return ctx.message(TypeError, v.replace, major=2, flavour="x")


def probe_replace_bad_value(ctx):
    v = _semver(ctx).Version.parse("1.2.3")
    return ctx.message(ValueError, v.replace, major=-1)


def probe_to_dict_plain(ctx):
    d = _semver(ctx).Version.parse("3.2.1-rc.1+b5").to_dict()
    return [type(d).__name__, list(d.items())]


def probe_to_dict_repr(ctx):
    return repr(_semver(ctx).Version(3, 2, 1).to_dict())


def probe_subclass_repr(ctx):
    return repr(_prefixed(ctx).parse("v1.0.0-a+b"))


def probe_bumps_subclass(ctx):
    v = _prefixed(ctx).parse("v1.2.3-rc.1")
    return [str(v.bump_major()), str(v.bump_minor()), str(v.bump_patch()), str(v.bump_prerelease()),
            str(v.bump_build()), str(v.finalize_version())]


def probe_compare_and_sort(ctx):
    Version = _semver(ctx).Version
    items = ["1.0.0", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-beta.2", "1.0.0-rc.1", "0.9.9", "1.0.0-alpha.beta"]
    return [str(v) for v in sorted(Version.parse(s) for s in items)] + [Version.parse("1.2.3").compare("1.2.4")]


def probe_parse_errors(ctx):
    Version = _semver(ctx).Version
    return [ctx.message(ValueError, Version.parse, s) for s in ("1.2", "01.2.3", "1.2.3-", "x")]


def probe_match_and_compat(ctx):
    Version = _semver(ctx).Version
    v = Version.parse("2.3.7")
    return [v.match(">=2.0.0"), v.match("<2.3.7"), v.match("!=2.3.7"),
            v.is_compatible(Version.parse("2.1.0")), v.is_compatible(Version.parse("3.0.0"))]


def probe_iter_and_index(ctx):
    v = _semver(ctx).Version.parse("4.5.6-pre+bld")
    return [list(v), v[0], list(v[1:3]), v.to_tuple()]


def probe_module_level_deprecated(ctx):
    semver = _semver(ctx)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [semver.bump_minor("1.2.3"), semver.replace("1.2.3", major=4), semver.compare("1.0.0", "2.0.0")]


def probe_cli(ctx):
    r = ctx.run([sys.executable, "-I", "-c", "import sys; sys.path.append('src'); from semver.cli import main; "
                 "sys.exit(main(sys.argv[1:]))", "bump", "minor", "1.2.3"])
    return [r["returncode"], r["stdout"].strip()]

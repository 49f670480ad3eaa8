"""Probes of real-packaging-parse-errors: what the workspace's packaging (src/ layout) answers
(bench/verdict_runner.py).

Fail-to-pass (packaging 23.1): a requirement whose version carries a `.*` suffix or a local label with an operator
other than == / != is refused with an error that says so (naming the suffix or the local label and the operators
that allow it); an unclosed bracket or parenthesis names what it encloses (extras, version specifier, marker
expression); platform names with spaces become tags with underscores. Pass-to-pass: valid requirements,
specifiers, versions, markers, tags and the utilities as packaging 23.0 answered them.
"""

import sys


def _pk(ctx, module="packaging"):
    src = ctx.path("src")
    if src not in sys.path:
        sys.path.append(src)  # after the standard library: the workspace shadows nothing
    return ctx.load(module)


def _error(ctx, text):
    req = _pk(ctx, "packaging.requirements")
    try:
        req.Requirement(text)
    except req.InvalidRequirement as e:
        return str(e).splitlines()[0]
    return None


def _says(message, *words):
    return message is not None and all(w.lower() in message.lower() for w in words)


def probe_dot_star_needs_equality(ctx):
    texts = ["name>=1.0.*", "name~=1.0.*", "name<=2.*", "name>1.0.*", "name (<3.*)"]
    return [_says(_error(ctx, t), ".*", "==", "!=") for t in texts]


def probe_local_label_needs_equality(ctx):
    texts = ["name<1.0+local", "name>=1.0+abc.5", "name~=1.0+x", "name>2+ubuntu"]
    return [_says(_error(ctx, t), "local", "==", "!=") for t in texts]


def probe_errors_tell_apart(ctx):
    dot, local = _error(ctx, "name>=1.0.*"), _error(ctx, "name<1.0+local")
    return [_says(dot, "local"), _says(local, ".*")]


def probe_unclosed_extras(ctx):
    return [_says(_error(ctx, t), "extras") for t in ("name[extra", "name[extra1, extra2", "name[ extra ")]


def probe_unclosed_specifier(ctx):
    return [_says(_error(ctx, t), "version specifier") for t in ("name (>=1.0", "name (>=1.0, <2")]


def probe_unclosed_marker(ctx):
    return [_says(_error(ctx, t), "marker") for t in ("name; (os_name == 'nt'", "name; ((python_version > '3')")]


def _platform(ctx, name, system="FreeBSD"):
    import platform
    import sysconfig
    tags = _pk(ctx, "packaging.tags")
    saved = platform.system, sysconfig.get_platform
    platform.system, sysconfig.get_platform = (lambda: system), (lambda: name)
    try:
        return list(tags.platform_tags())
    finally:
        platform.system, sysconfig.get_platform = saved


def probe_platform_with_spaces(ctx):
    return [_platform(ctx, "freebsd-13.1-RELEASE p3-amd64"), _platform(ctx, "sunos 5.11 i86pc", "SunOS")]


def probe_compatible_tags_with_spaces(ctx):
    import platform
    import sysconfig
    tags = _pk(ctx, "packaging.tags")
    saved = platform.system, sysconfig.get_platform
    platform.system, sysconfig.get_platform = (lambda: "Haiku"), (lambda: "haiku-r1 beta4-x86_64")
    try:
        return [str(t) for t in tags.compatible_tags(python_version=(3, 11), interpreter="cp311")][:4]
    finally:
        platform.system, sysconfig.get_platform = saved


def probe_platform_plain(ctx):
    return [_platform(ctx, "freebsd-13.1-RELEASE-amd64"), _platform(ctx, "netbsd-9.3-amd64", "NetBSD")]


def probe_valid_requirements(ctx):
    req = _pk(ctx, "packaging.requirements")
    out = []
    for text in ("name[b,a]>=1.0,!=1.5.*; python_version >= '3.8'", "name==1.0.*", "name!=2.*", "name==1.0+local",
                 "name @ https://example.org/name-1.0.tar.gz", "Name_X (>=1.0, <2)"):
        r = req.Requirement(text)
        out.append([r.name, sorted(r.extras), str(r.specifier), str(r.marker) if r.marker else None, r.url])
    return out


def probe_other_errors(ctx):
    texts = ["name>=1.0 garbage", "name>=", "[extra]name", "name; os_name ==", "name @ "]
    return [_error(ctx, t) is not None for t in texts]


def probe_specifier_contains(ctx):
    spec = _pk(ctx, "packaging.specifiers")
    cases = [("==1.0.*", "1.0"), ("==1.0.*", "1.0.1"), ("!=1.0.*", "1.1"), ("==1.*", "1.9.9"), ("~=1.4", "1.9"),
             ("~=1.4.2", "1.5"), (">=1.0,<2", "2.0"), ("==1.0.0.*", "1"), (">1.0", "1.0.post1"), ("<2", "2.0a1")]
    return [spec.SpecifierSet(s).contains(v) for s, v in cases] + \
        [list(spec.SpecifierSet(">=1.0").filter(["0.9", "1.0", "1.1a1", "2.0"]))]


def probe_invalid_specifiers(ctx):
    spec = _pk(ctx, "packaging.specifiers")
    out = []
    for text in (">=1.0.*", "~=1", "==1.0+local.*", "=>1.0", "<1.0+local"):
        try:
            spec.Specifier(text)
            out.append(False)
        except spec.InvalidSpecifier:
            out.append(True)
    return out


def probe_versions(ctx):
    v = _pk(ctx, "packaging.version")
    utils = _pk(ctx, "packaging.utils")
    vs = ["1.0.post1", "1.0", "1.0a1", "1!0.1", "1.0.dev1", "1.0+local", "0.9"]
    return [[str(x) for x in sorted(v.Version(s) for s in vs)], utils.canonicalize_version("1.0.0"),
            utils.canonicalize_name("Foo.Bar__baz"), v.Version("1.2.3rc4").pre, v.Version("2.0+ab.1").local]


def probe_markers(ctx):
    m = _pk(ctx, "packaging.markers")
    env = {"python_version": "3.11", "os_name": "posix", "sys_platform": "linux"}
    return [m.Marker("python_version >= '3.8' and os_name == 'posix'").evaluate(env),
            m.Marker("sys_platform == 'win32' or python_version < '3'").evaluate(env),
            str(m.Marker("os_name=='nt'"))]


def probe_tags_and_wheels(ctx):
    tags = _pk(ctx, "packaging.tags")
    utils = _pk(ctx, "packaging.utils")
    name, ver, build, wheel_tags = utils.parse_wheel_filename("foo_bar-1.0-1-py3-none-any.whl")
    return [sorted(str(t) for t in tags.parse_tag("cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64")),
            [name, str(ver), list(build), sorted(str(t) for t in wheel_tags)]]

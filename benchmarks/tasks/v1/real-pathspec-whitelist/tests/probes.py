"""Probes of real-pathspec-whitelist: what the workspace's pathspec answers (bench/verdict_runner.py).

Fail-to-pass (pathspec 0.12.0, issue #81 and the check_* API): after "*", a whitelisted folder's contents
("!libfoo/**", "!src/**") are not ignored, as git decides; PathSpec.check_file / check_files / check_tree_files
answer per file whether it is included and the index of the last pattern that matched; compiled patterns keep
their source text in `.pattern`. Pass-to-pass: the gitignore cases 0.11.2 already got right (directory patterns,
"!libfoo/*", "!libfoo/"), plain gitwildmatch specs, tree walks, normalisation, errors.
"""

FILES = ["ignore.txt", "libfoo/__init__.py", "libfoo/sub/x.py", "build/keep/a.txt", "build/o.o", "src/m.py",
         "src/pkg/deep/n.py", "a/x/b/c", "logs/app.log", "important.log", "README"]


def _ps(ctx):
    return ctx.load("pathspec")


def _git(ctx, lines):
    return _ps(ctx).GitIgnoreSpec.from_lines(lines)


def _res(r):
    """A check result as [file as text, included (None counts as False), index of the deciding pattern]."""
    return [str(r.file), bool(r.include), r.index]


def _tree(ctx, files):
    import os
    root = os.path.join(ctx.tmp, "tree")
    for f in files:
        path = os.path.join(root, *f.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            fh.write("x\n")
    return root


def probe_whitelist_folder_double_star(ctx):
    return sorted(_git(ctx, ["*", "!libfoo", "!libfoo/**"]).match_files(FILES))


def probe_whitelist_deep_tree(ctx):
    return sorted(_git(ctx, ["*", "!src/**"]).match_files(FILES))


def probe_whitelist_nested_double_star(ctx):
    return [sorted(_git(ctx, ["*", "!src/pkg/**"]).match_files(FILES)),
            sorted(_git(ctx, ["**", "!libfoo/**", "libfoo/sub/"]).match_files(FILES))]


def probe_whitelist_single_star_and_dir(ctx):
    return [sorted(_git(ctx, ["*", "!libfoo", "!libfoo/*"]).match_files(FILES)),
            sorted(_git(ctx, ["*", "!libfoo", "!libfoo/"]).match_files(FILES)),
            sorted(_git(ctx, ["build/**", "!build/keep/**"]).match_files(FILES))]


def probe_whitelist_tree_walk(ctx):
    root = _tree(ctx, FILES)
    return sorted(_git(ctx, ["*", "!libfoo/**", "!README"]).match_tree_files(root))


def probe_gitignore_directory_priority(ctx):
    return [sorted(_git(ctx, ["*.log", "!important.log", "logs/"]).match_files(FILES)),
            sorted(_git(ctx, ["libfoo/", "!libfoo/__init__.py"]).match_files(FILES)),
            sorted(_git(ctx, ["*.py", "!libfoo/", "src/pkg/"]).match_files(FILES))]


def probe_check_file_gitignore(ctx):
    spec = _git(ctx, ["*", "!libfoo", "!libfoo/**", "*.pyc"])
    return [_res(spec.check_file(f)) for f in ["ignore.txt", "libfoo/__init__.py", "libfoo/x.pyc", "libfoo"]]


def probe_check_files_gitignore(ctx):
    spec = _git(ctx, ["*.log", "!important.log", "logs/", "build/**", "!build/keep/**"])
    return sorted(_res(r) for r in spec.check_files(FILES))


def probe_check_files_plain_spec(ctx):
    spec = _ps(ctx).PathSpec.from_lines("gitwildmatch", ["*.py", "!test_*.py", "/build/", "# comment", "", "*.txt"])
    files = ["a.py", "test_a.py", "build/x", "x/build/y", "notes.txt", "README"]
    return [_res(r) for r in spec.check_files(files)]


def probe_check_file_no_match(ctx):
    spec = _ps(ctx).PathSpec.from_lines("gitwildmatch", ["*.py"])
    r = spec.check_file("README")
    return [r.index, bool(r.include), str(r.file), spec.check_file("x/y.py").index]


def probe_check_file_keeps_original(ctx):
    import pathlib
    spec = _ps(ctx).PathSpec.from_lines("gitwildmatch", ["docs/", "!docs/keep.md"])
    p = pathlib.PurePosixPath("docs/keep.md")
    r = spec.check_file(p)
    w = spec.check_file("docs\\api.md", separators=["\\"])
    return [r.file == p, type(r.file).__name__, _res(r), _res(w)]


def probe_check_tree_files(ctx):
    root = _tree(ctx, FILES)
    spec = _git(ctx, ["*", "!libfoo/**", "!README", "libfoo/sub/"])
    return sorted(_res(r) for r in spec.check_tree_files(root))


def probe_check_files_needs_iterable(ctx):
    spec = _ps(ctx).PathSpec.from_lines("gitwildmatch", ["*.py"])
    return [ctx.raises(TypeError, lambda: list(spec.check_files(5))),
            [_res(r) for r in spec.check_files(iter(["a.py", "b"]))]]


def probe_pattern_keeps_source(ctx):
    ps = _ps(ctx)
    spec = ps.PathSpec.from_lines("gitwildmatch", ["*.py", "!keep/**"])
    rp = ps.pattern.RegexPattern(r"^src/.*\.py$")
    return [[p.pattern for p in spec.patterns], rp.pattern, rp.include,
            ps.patterns.GitWildMatchPattern("/build/").pattern]


def probe_plain_spec_unchanged(ctx):
    spec = _ps(ctx).PathSpec.from_lines("gitwildmatch", ["*.py", "!test_*.py", "/build/"])
    return [[bool(spec.match_file(f)) for f in ["a.py", "test_a.py", "build/x", "x/build/y", "src/a.py"]],
            sorted(spec.match_files(["a.py", "test_a.py", "build/x", "b/c.py"])),
            sorted(spec.match_files(["a.py", "test_a.py", "b/c.py"], negate=True))]


def probe_tree_entries_and_len(ctx):
    ps = _ps(ctx)
    root = _tree(ctx, FILES)
    spec = ps.PathSpec.from_lines("gitwildmatch", ["*.py", "logs/"])
    other = ps.PathSpec.from_lines("gitwildmatch", ["*.txt"])
    both = spec + other
    return [sorted(e.path for e in spec.match_tree_entries(root)), len(spec), len(both),
            sorted(both.match_tree_files(root)), spec == ps.PathSpec.from_lines("gitwildmatch", ["*.py", "logs/"])]


def probe_gitignore_spec_equality_and_reversed_args(ctx):
    ps = _ps(ctx)
    a = ps.GitIgnoreSpec.from_lines(["*.py"])
    b = ps.GitIgnoreSpec.from_lines("gitwildmatch", ["*.py"])
    c = ps.GitIgnoreSpec.from_lines(["*.py"], "gitwildmatch")
    return [a == b, b == c, a == ps.PathSpec.from_lines("gitwildmatch", ["*.py"]), sorted(c.match_files(FILES))]


def probe_normalize_and_errors(ctx):
    ps = _ps(ctx)
    util = ps.util
    return [util.normalize_file("a\\b\\c.py", separators=["\\"]), util.normalize_file("./x/y"),
            ctx.raises(ps.patterns.gitwildmatch.GitWildMatchPatternError,
                       ps.patterns.GitWildMatchPattern, "***"),
            ps.patterns.GitWildMatchPattern.escape("a[b]*c?")]

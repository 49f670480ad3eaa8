"""The parts of a Dockerfile an image builder must understand before building: its stages and the images they use.

`parse` splits a Dockerfile into logical instructions (parser directives, `\\` continuations and comments handled
as Docker does), resolves `ARG` defaults declared before the first `FROM` (and build args) in `FROM` references,
and lists every external image the build reads: each stage's `FROM` and each `COPY/ADD --from=<image>` that does
not name an earlier stage. `rewrite` replaces those references (by the builder's mapping to local images) and
leaves every other line byte for byte. Reference: https://docs.docker.com/reference/dockerfile/ (FROM, ARG,
"Understand how ARG and FROM interact", COPY --from, parser directives).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping

_DIRECTIVE = re.compile(r"^#\s*([a-zA-Z][a-zA-Z0-9_-]*)\s*=\s*(.*?)\s*$")
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?:(:[-+])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")
_FROM_FLAG = re.compile(r"^--[a-z-]+=\S*$")


class DockerfileError(ValueError):
    """The Dockerfile cannot be read; the message names the line and what was expected."""


@dataclasses.dataclass(frozen=True)
class Instruction:
    """One logical instruction: its keyword (upper case), its argument text and the physical lines it spans."""

    keyword: str
    args: str
    first_line: int  # 0-based index of its first physical line
    last_line: int  # 0-based index of its last physical line (continuations included)


@dataclasses.dataclass(frozen=True)
class ImageUse:
    """An external image the build reads: a stage's base (`FROM`) or a `COPY/ADD --from=` source."""

    ref: str  # the reference after ARG substitution, as written (e.g. "ubuntu:24.04")
    instruction: int  # index into Dockerfile.instructions
    stage: str | None  # the stage name (`AS name`) for a FROM, None for a --from source


@dataclasses.dataclass(frozen=True)
class Dockerfile:
    """A parsed Dockerfile: its physical lines, logical instructions and the external images it uses."""

    lines: tuple[str, ...]
    instructions: tuple[Instruction, ...]
    uses: tuple[ImageUse, ...]
    stages: tuple[str | None, ...]  # each stage's name (None when unnamed), in order


def _logical(lines: list[str], escape: str) -> list[Instruction]:
    """Join continuation lines into instructions (comment lines inside a continuation are dropped, as Docker does)."""
    out, parts, start = [], [], None
    for i, raw in enumerate(lines):
        stripped = raw.strip()
        if start is None and (not stripped or stripped.startswith("#")):
            continue
        if start is not None and stripped.startswith("#"):
            continue
        if start is None:
            start = i
        body = raw.rstrip()
        if body.endswith(escape):
            parts.append(body[:-1])
            continue
        parts.append(body)
        text = " ".join(p.strip() for p in parts).strip()
        keyword, _, args = text.partition(" ")
        out.append(Instruction(keyword.upper(), args.strip(), start, i))
        parts, start = [], None
    if start is not None:
        text = " ".join(p.strip() for p in parts).strip()
        keyword, _, args = text.partition(" ")
        out.append(Instruction(keyword.upper(), args.strip(), start, len(lines) - 1))
    return out


def _escape_char(lines: list[str]) -> str:
    """The `# escape=` parser directive (default backslash); directives end at the first other line."""
    escape = "\\"
    for raw in lines:
        m = _DIRECTIVE.match(raw.strip())
        if not m:
            break
        if m.group(1).lower() == "escape":
            escape = m.group(2)
            if escape not in ("\\", "`"):
                raise DockerfileError(f"parser directive escape={escape!r}; expected '\\\\' or '`'")
    return escape


def substitute(text: str, values: Mapping[str, str]) -> str:
    """Docker's variable substitution: $VAR, ${VAR}, ${VAR:-default}, ${VAR:+alternative} (unset -> empty)."""
    def one(m: re.Match) -> str:
        name = m.group(1) or m.group(4)
        value = values.get(name)
        if m.group(2) == ":-":
            return value if value else m.group(3)
        if m.group(2) == ":+":
            return m.group(3) if value else ""
        return value or ""

    return _VAR.sub(one, text)


def _arg_defaults(args: str) -> dict[str, str]:
    """NAME[=default] pairs of one ARG instruction (quotes around a default removed)."""
    out = {}
    for token in args.split():
        name, eq, default = token.partition("=")
        out[name] = default.strip("\"'") if eq else ""
    return out


def _parse_from(args: str, values: Mapping[str, str], where: str) -> tuple[str, str | None]:
    """(image reference, stage name or None) of a FROM instruction's arguments."""
    words = [w for w in args.split() if not _FROM_FLAG.match(w)]
    if len(words) == 3 and words[1].lower() == "as":
        return substitute(words[0], values), words[2]
    if len(words) == 1:
        return substitute(words[0], values), None
    raise DockerfileError(f"{where}: FROM {args!r}; expected 'FROM [--platform=...] IMAGE [AS NAME]'")


def _copy_from(args: str) -> str | None:
    """The --from= value of a COPY/ADD instruction, if any."""
    for word in args.split():
        if word.startswith("--from="):
            return word[len("--from="):]
        if not word.startswith("--"):
            return None
    return None


def parse(text: str, build_args: Mapping[str, str] | None = None, name: str = "Dockerfile") -> Dockerfile:
    """Parse a Dockerfile; DockerfileError when it has no FROM or a FROM cannot be read."""
    lines = text.splitlines()
    instructions = _logical(lines, _escape_char(lines))
    values: dict[str, str] = {}
    uses, stages = [], []
    for index, ins in enumerate(instructions):
        where = f"{name} line {ins.first_line + 1}"
        if ins.keyword == "ARG" and not stages:
            values.update({k: (build_args or {}).get(k, v) for k, v in _arg_defaults(ins.args).items()})
        elif ins.keyword == "FROM":
            ref, stage = _parse_from(ins.args, values, where)
            if not ref:
                raise DockerfileError(f"{where}: FROM {ins.args!r} resolves to an empty image reference")
            if ref.lower() != "scratch" and ref not in [s for s in stages if s] and not ref.isdigit():
                uses.append(ImageUse(ref, index, stage))
            stages.append(stage)
        elif ins.keyword in ("COPY", "ADD") and stages:
            source = _copy_from(ins.args)
            if source and source not in [s for s in stages if s] and not source.isdigit():
                uses.append(ImageUse(source, index, None))
        elif not stages and ins.keyword not in ("ARG",):
            raise DockerfileError(f"{where}: {ins.keyword} before the first FROM; expected FROM (or ARG) first")
    if not stages:
        raise DockerfileError(f"{name} has no FROM instruction; expected at least one build stage")
    return Dockerfile(tuple(lines), tuple(instructions), tuple(uses), tuple(stages))


def rewrite(df: Dockerfile, replace: Callable[[str], str]) -> str:
    """The Dockerfile text with every external image reference replaced by replace(ref); other lines unchanged.

    A FROM that uses an external image becomes `FROM <new> [AS name]` (a --platform flag is dropped: the local
    image is built for this machine); a COPY/ADD --from=<image> gets the new reference in place.
    """
    lines = list(df.lines)
    for use in df.uses:
        ins = df.instructions[use.instruction]
        new = replace(use.ref)
        if ins.keyword == "FROM":
            text = f"FROM {new}" + (f" AS {use.stage}" if use.stage else "")
        else:
            text = f"{ins.keyword} {ins.args.replace('--from=' + _copy_from(ins.args), '--from=' + new, 1)}"
        lines[ins.first_line] = text
        for i in range(ins.first_line + 1, ins.last_line + 1):
            lines[i] = ""
    return "\n".join(lines) + "\n"

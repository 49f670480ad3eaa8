"""The base-image table: which locally bootstrapped Debian root filesystem stands in for a public base image.

No container registry is reachable from the machines this runs on, so a Dockerfile's `FROM ubuntu:24.04` cannot be
pulled. Every public base a task may name is reproduced from Debian's package archive instead (debootstrap, then
packages on top) and the mapping is stated in the build log and in docs/env.md:

| public base (any registry prefix, tag or digest) | local base |
|---|---|
| ubuntu:* | Debian bookworm minbase |
| debian:bullseye* / 11*, bookworm* / 12* / stable* / latest, trixie* / 13* | that Debian release, minbase |
| python:3.9* (and any python:*-bullseye) | Debian bullseye + python3 3.9, pip, venv (+ gcc, git, curl unless -slim) |
| python:3.10*, 3.11* (and any python:*-bookworm) | Debian bookworm + python3 3.11, pip, venv |
| python:3.12*, 3.13*, 3.14*, 3 / latest (and any python:*-trixie) | Debian trixie + python3 3.13, pip, venv |
| ghcr.io/laude-institute/t-bench/ubuntu-24-04:* | Debian bookworm + tmux, asciinema (what the t-bench image adds) |
| ghcr.io/laude-institute/t-bench/python-3-13:* | Debian trixie + python3 3.13, pip, venv, tmux, asciinema |

Every base also trusts the host's extra CA certificates (an intercepting egress proxy must be trusted inside as it
is outside) and has ca-certificates installed. Python bases behave like the official python image where it
matters to tasks: `python` and `pip` exist, and `pip install` works system-wide (Debian's EXTERNALLY-MANAGED
marker is removed). Where the Python version of the tag cannot be matched the note says so.
Anything else (alpine: musl and apk; node, golang, rust, openjdk, nvidia/cuda, ...) is `UnsupportedBase` with
the reason, never a silent substitute.
"""

from __future__ import annotations

import dataclasses
import re

SUITE_PYTHON = {"bullseye": "3.9", "bookworm": "3.11", "trixie": "3.13"}  # Debian release -> its python3
SUITE_NUMBERS = {"11": "bullseye", "12": "bookworm", "13": "trixie"}
PYTHON_SUITE = {"3.9": "bullseye", "3.10": "bookworm", "3.11": "bookworm", "3.12": "trixie", "3.13": "trixie",
                "3.14": "trixie", "3": "trixie", "latest": "trixie"}  # python tag -> the closest Debian python3
PYTHON_PACKAGES = ("python3", "python3-pip", "python3-venv")
FULL_PYTHON_PACKAGES = ("python3-dev", "build-essential", "git", "curl", "wget")  # what the non-slim image adds
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TBENCH = "ghcr.io/laude-institute/t-bench/"


class UnsupportedBase(ValueError):
    """A base image with no local stand-in; the message says why."""


@dataclasses.dataclass(frozen=True)
class BaseRecipe:
    """A Debian root filesystem standing in for one public base image."""

    suite: str  # Debian release to debootstrap (minbase): bullseye | bookworm | trixie
    packages: tuple[str, ...] = ()  # Debian packages installed on top (apt-get install --no-install-recommends)
    python: bool = False  # python-image layout: `python`/`pip` commands, pip may install into the system
    env: tuple[tuple[str, str], ...] = (("PATH", DEFAULT_PATH),)  # ENV of the public image
    cmd: tuple[str, ...] = ("bash",)  # CMD of the public image
    note: str = ""  # how the stand-in differs from the public image (build log, docs)

    def dockerfile(self, debootstrap_image: str) -> str:
        """The Dockerfile that turns the debootstrapped release into this base."""
        lines = [f"FROM {debootstrap_image}"]
        if self.packages:
            lines.append("RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "
                         f"--no-install-recommends {' '.join(self.packages)} && rm -rf /var/lib/apt/lists/*")
        if self.python:
            lines.append("RUN ln -sf /usr/bin/python3 /usr/local/bin/python && ln -sf /usr/bin/pip3 /usr/local/bin/pip"
                         " && rm -f /usr/lib/python3*/EXTERNALLY-MANAGED")
        lines += [f'ENV {k}="{v}"' for k, v in self.env]
        lines.append("CMD [" + ", ".join(f'"{c}"' for c in self.cmd) + "]")
        return "\n".join(lines) + "\n"


def normalize(ref: str) -> tuple[str, str]:
    """(repository, tag) of an image reference: registry `docker.io/` and `library/` dropped, digest ignored."""
    ref = ref.strip().split("@", 1)[0]
    for prefix in ("docker.io/", "index.docker.io/", "registry-1.docker.io/"):
        ref = ref.removeprefix(prefix)
    ref = ref.removeprefix("library/")
    slash = ref.rfind("/")
    colon = ref.rfind(":")
    if colon > slash:
        return ref[:colon].lower(), ref[colon + 1:]
    return ref.lower(), "latest"


def _debian_suite(tag: str) -> str | None:
    """The Debian release a debian:TAG names (None if unknown)."""
    head = tag.split("-", 1)[0].split(".", 1)[0]
    if head in SUITE_NUMBERS:
        return SUITE_NUMBERS[head]
    if head in SUITE_PYTHON:
        return head
    if head in ("stable", "latest"):
        return "trixie"
    return None


def _python(tag: str, extra: tuple[str, ...] = ()) -> BaseRecipe:
    """The stand-in for python:TAG (version from the tag, Debian release from a -bullseye/-bookworm/-trixie suffix)."""
    parts = tag.split("-")
    suite = next((p for p in parts if p in SUITE_PYTHON), None)
    version = parts[0] if re.fullmatch(r"\d+(\.\d+)*|latest", parts[0]) else None
    if version is None and parts[0] not in ("slim", "bookworm", "bullseye", "trixie"):
        raise UnsupportedBase(f"python:{tag}: unknown tag; expected python:3.X[-slim][-bookworm|-bullseye|-trixie]")
    minor = ".".join((version or "latest").split(".")[:2])
    suite = suite or PYTHON_SUITE.get(minor)
    if suite is None:
        raise UnsupportedBase(f"python:{tag}: no Debian release ships a python3 near {minor}; supported: "
                              f"{', '.join(sorted(PYTHON_SUITE))}")
    have = SUITE_PYTHON[suite]
    note = f"python3 {have} from Debian {suite}" + ("" if minor in (have, "3", "latest") else
                                                     f" (the tag asks for {minor}; no Debian release ships it)")
    full = "slim" not in parts
    packages = PYTHON_PACKAGES + (FULL_PYTHON_PACKAGES if full else ()) + extra
    return BaseRecipe(suite, packages, python=True, env=(("PATH", DEFAULT_PATH), ("LANG", "C.UTF-8")),
                      cmd=("python3",), note=note + ("; the full image's build tools" if full else ""))


def map_base(ref: str) -> BaseRecipe:
    """The local stand-in for a public base image reference, or UnsupportedBase naming the reason."""
    repo, tag = normalize(ref)
    if repo.rsplit("/", 1)[-1] == "alpine" or any(p.startswith("alpine") for p in tag.split("-")):
        raise UnsupportedBase(f"{ref}: Alpine (musl libc, apk) has no Debian stand-in; the task needs a glibc base")
    if repo == "ubuntu":
        return BaseRecipe("bookworm", cmd=("/bin/bash",),
                          note=f"Ubuntu {tag} userland replaced by Debian bookworm (same apt/dpkg, glibc 2.36)")
    if repo == "debian":
        suite = _debian_suite(tag)
        if suite is None:
            raise UnsupportedBase(f"debian:{tag}: unknown release; expected bullseye/bookworm/trixie (11/12/13)")
        return BaseRecipe(suite, note="minbase" + (" (slim)" if "slim" in tag else ""))
    if repo == "python":
        return _python(tag)
    if repo == TBENCH + "ubuntu-24-04":
        return BaseRecipe("bookworm", ("tmux", "asciinema"), cmd=("/bin/bash",),
                          note="t-bench's Ubuntu 24.04 image (ubuntu + tmux + asciinema) on Debian bookworm")
    if repo == TBENCH + "python-3-13":
        return _python("3.13-slim", ("tmux", "asciinema"))
    raise UnsupportedBase(f"{ref}: no local stand-in (no registry is reachable); supported bases: ubuntu:*, "
                          f"debian:*, python:3.*, {TBENCH}ubuntu-24-04, {TBENCH}python-3-13")


def describe(ref: str, recipe: BaseRecipe) -> str:
    """The mapping line for build logs and reports, e.g. 'ubuntu:24.04 -> Debian bookworm (...)'."""
    extra = f" + {' '.join(recipe.packages)}" if recipe.packages else ""
    return f"{ref} → Debian {recipe.suite}{extra}" + (f" ({recipe.note})" if recipe.note else "")

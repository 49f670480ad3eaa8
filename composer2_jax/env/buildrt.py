"""The OCI runtime of image builds: checks and tightens each `RUN` step's container spec, then hands it to runc.

Usage (podman calls it as its runtime; images.py writes a two-line shell script that execs it):
    python3 -I -S buildrt.py RUNC POLICY_JSON -- [RUNTIME ARGS...]

On `create --bundle DIR`, before runc sees DIR/config.json, the spec must
- have a user namespace whose uid and gid maps send no id to a host id below POLICY["min_host_id"] (so no step runs
  as host uid 0 or any system user): anything else is refused with exit status 1 and a message naming the map;
and it is changed so that
- `process.noNewPrivileges` is true (setuid binaries cannot raise privileges);
- podman's seccomp profile also refuses nested user namespaces (unshare/clone with CLONE_NEWUSER), as sandboxes do;
- `linux.resources` caps memory and pids, and `process.rlimits` caps open files and file size, with the values of
  the sandbox limits (POLICY["memory_bytes"], ["pids"], ["open_files"], ["file_size_bytes"]);
- the container's root directory is owned by the namespace's root (containers/storage leaves the new layer's top
  directory owned by host uid 0, which root inside could then not write to).
On `delete ID` (the step has exited; podman commits its layer next), every owner and group in the step's
overlay upper directory that lies in the build's id range is shifted back to the image id it stands for (host uid
min_host_id + n -> n): podman 4.3 commits the upper directory as it is and would shift those ids again for the
next step's user namespace, leaving them unmapped there. Committed layers so hold image ids 0..65535, as in a
build without a user namespace. Layers podman writes itself (COPY, ADD, WORKDIR) keep the build's host ids, which
the next step's id-mapped view of its lower layers cannot show: `create` shifts them back in those layers and
has overlay copy each such path up with its new owner (`fix_lowers`; a COPY'd file is so stored twice, once in
the next RUN step's layer); images.py shifts what is left when it exports the layers.
Podman's default seccomp profile, its capability set and runc's pivot_root (no chroot, so no chroot escape) stay as
they are. Every other subcommand is passed to runc unchanged. Stdlib only.
"""

import json
import os
import stat
import subprocess
import sys

ID_RANGE = 65536
UPPER_FILE = "composer2-upper.json"  # written into the bundle at create: the step's upper dir and id base
CLONE_NEWUSER = 0x10000000
NAMESPACE_CALLS = ("unshare", "clone", "clone3")
# seccomp rules in place of podman's unconditional ALLOW of NAMESPACE_CALLS (libseccomp lets an unconditional rule
# win over conditional ones): unshare and clone are allowed without CLONE_NEWUSER (value = mask, valueTwo = the
# masked value) and refused (EPERM) with it; clone3, whose flags seccomp cannot read, answers ENOSYS so libc falls
# back to clone, as under Docker's profile
NO_NESTED_USERNS = [
    {"names": ["unshare", "clone"], "action": "SCMP_ACT_ALLOW",
     "args": [{"index": 0, "value": CLONE_NEWUSER, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}]},
    {"names": ["unshare", "clone"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
     "args": [{"index": 0, "value": CLONE_NEWUSER, "valueTwo": CLONE_NEWUSER, "op": "SCMP_CMP_MASKED_EQ"}]},
    {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38},
]


def _bundle(args):
    """The --bundle directory of a runtime `create` command line (None for other commands)."""
    if "create" not in args:
        return None
    rest = args[args.index("create") + 1:]
    for i, arg in enumerate(rest):
        if arg in ("--bundle", "-b") and i + 1 < len(rest):
            return rest[i + 1]
        if arg.startswith("--bundle="):
            return arg.split("=", 1)[1]
    return "."


def check_maps(spec, min_host_id):
    """Raise ValueError unless the spec has a user namespace mapping every id to host ids >= min_host_id."""
    linux = spec.get("linux") or {}
    if not any(ns.get("type") == "user" for ns in linux.get("namespaces") or ()):
        raise ValueError("the build step's spec has no user namespace; expected one (its root must not be host root)")
    for key in ("uidMappings", "gidMappings"):
        maps = linux.get(key) or []
        if not maps:
            raise ValueError(f"the build step's spec has no {key}; expected the build's id range")
        low = [m for m in maps if m["hostID"] < min_host_id]
        if low:
            raise ValueError(f"the build step's {key} {low} reach host ids below {min_host_id}; expected none")


def tighten(spec, policy):
    """The spec with no_new_privs, the sandbox limits and nothing else changed."""
    process = spec.setdefault("process", {})
    process["noNewPrivileges"] = True
    rlimits = [r for r in process.get("rlimits") or () if r["type"] not in ("RLIMIT_NOFILE", "RLIMIT_FSIZE")]
    for kind, value in (("RLIMIT_NOFILE", policy["open_files"]), ("RLIMIT_FSIZE", policy["file_size_bytes"])):
        rlimits.append({"type": kind, "hard": value, "soft": value})
    process["rlimits"] = rlimits
    resources = spec.setdefault("linux", {}).setdefault("resources", {})
    resources.setdefault("memory", {})["limit"] = policy["memory_bytes"]
    resources.setdefault("pids", {})["limit"] = policy["pids"]
    seccomp = spec["linux"].get("seccomp")
    if seccomp is not None:  # no nested user namespace, as in sandboxes (podman's profile allows them)
        rules = []
        for rule in seccomp.get("syscalls") or ():
            names = [n for n in rule.get("names", ()) if n not in NAMESPACE_CALLS]
            if names:
                rules.append({**rule, "names": names})
        seccomp["syscalls"] = rules + [dict(r) for r in NO_NESTED_USERNS]
    return spec


def own_root(spec, bundle):
    """chown the container's root directory to the namespace's root (its host ids)."""
    root = spec["root"]["path"]
    root = root if os.path.isabs(root) else os.path.join(bundle, root)
    linux = spec["linux"]
    uid = next(m["hostID"] for m in linux["uidMappings"] if m["containerID"] == 0)
    gid = next(m["hostID"] for m in linux["gidMappings"] if m["containerID"] == 0)
    os.chown(root, uid, gid)


def overlay_options(root):
    """The options (name -> value) of the overlay mounted at root (from /proc/self/mountinfo), or None."""
    root = os.path.realpath(root)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.rstrip("\n").partition(" - ")
            point = left.split()[4].encode().decode("unicode_escape")
            fstype, _, opts = (right.split(" ", 2) + ["", ""])[:3]
            if point == root and fstype == "overlay":
                return dict((o.split("=", 1) + [""])[:2] for o in opts.split(","))
    return None


def lower_diffs(lowerdir):
    """The layer diff directories behind an overlay's lowerdir option: podman names each lower by its short link
    (.../overlay/<container>/mapped/N/l/<LINK> for the id-mapped clone of .../overlay/l/<LINK>)."""
    out = []
    for lower in lowerdir.split(":"):
        head, sep, _ = lower.rpartition("/overlay/")
        if sep:
            out.append(os.path.realpath(os.path.join(head, "overlay", "l", os.path.basename(lower))))
    return out


def fix_lowers(root, lowerdir, base):
    """Shift the build's host ids (base + n) that podman's COPY/ADD/WORKDIR steps left in the step's lower layers
    back to image ids n on disk, then chown each such path to base + n through the step's root, so the overlay
    copies it up with its new owner (the id-mapped lower showed it unmapped, and overlay caches what it showed)."""
    fixed = {}
    for diff in lower_diffs(lowerdir):
        for dirpath, dirnames, filenames in os.walk(diff):
            for name in [*dirnames, *filenames]:
                path = os.path.join(dirpath, name)
                st = os.lstat(path)
                if base <= st.st_uid < base + ID_RANGE or base <= st.st_gid < base + ID_RANGE:
                    rel = os.path.relpath(path, diff)
                    fixed.setdefault(rel, (st.st_uid, st.st_gid))
        unshift(diff, base)
    for rel in sorted(fixed):  # parents first
        try:
            os.lchown(os.path.join(root, rel), *fixed[rel])
        except OSError:
            pass  # hidden by an upper layer (whiteout or replaced): not visible to the step


def unshift(top, base):
    """Owners and groups in base..base+65535 under top (no link followed) become 0..65535; setuid bits kept.
    Hard-linked inodes are changed once."""
    seen = set()
    for dirpath, dirnames, filenames in os.walk(top):
        for path in [dirpath, *(os.path.join(dirpath, n) for n in filenames)] + \
                [os.path.join(dirpath, n) for n in dirnames if os.path.islink(os.path.join(dirpath, n))]:
            st = os.lstat(path)
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            uid = st.st_uid - base if base <= st.st_uid < base + ID_RANGE else st.st_uid
            gid = st.st_gid - base if base <= st.st_gid < base + ID_RANGE else st.st_gid
            if (uid, gid) != (st.st_uid, st.st_gid):
                os.lchown(path, uid, gid)
                if stat.S_ISREG(st.st_mode) and st.st_mode & (stat.S_ISUID | stat.S_ISGID):
                    os.chmod(path, stat.S_IMODE(st.st_mode))  # chown cleared them


def _create(bundle, policy):
    """Check, tighten and rewrite a step's spec; remember its upper dir for delete. An error message or None."""
    path = os.path.join(bundle, "config.json")
    with open(path) as f:
        spec = json.load(f)
    try:
        check_maps(spec, policy["min_host_id"])
    except ValueError as e:
        return str(e)
    tighten(spec, policy)
    own_root(spec, bundle)
    root = spec["root"]["path"]
    root = root if os.path.isabs(root) else os.path.join(bundle, root)
    options = overlay_options(root)
    if not options or "upperdir" not in options:
        return f"the step's root {root} is not an overlay mount; expected podman's overlay storage"
    fix_lowers(root, options.get("lowerdir", ""), policy["min_host_id"])
    with open(os.path.join(bundle, UPPER_FILE), "w") as f:
        json.dump({"upper": options["upperdir"], "base": policy["min_host_id"]}, f)
    with open(path + ".tmp", "w") as f:
        json.dump(spec, f)
    os.replace(path + ".tmp", path)
    return None


def _before_delete(runc, args):
    """Shift the exited step's upper dir back to image ids (see the module docstring)."""
    i = args.index("delete")
    state = subprocess.run([runc, *args[:i], "state", args[-1]], capture_output=True, text=True, check=False)
    if state.returncode != 0:
        return
    record = os.path.join(json.loads(state.stdout).get("bundle", ""), UPPER_FILE)
    if os.path.isfile(record):
        with open(record) as f:
            facts = json.load(f)
        unshift(facts["upper"], facts["base"])


def main(argv):
    """Check and tighten a create's spec, then exec runc with the same arguments."""
    if len(argv) < 4 or argv[3] != "--":
        sys.stderr.write("usage: buildrt.py RUNC POLICY_JSON -- [RUNTIME ARGS...]\n")
        return 2
    runc, policy, args = argv[1], json.loads(argv[2]), argv[4:]
    bundle = _bundle(args)
    if bundle is not None:
        error = _create(bundle, policy)
        if error is not None:
            sys.stderr.write(f"composer2 build runtime: {error}\n")
            return 1
    elif "delete" in args:
        _before_delete(runc, args)
    os.execv(runc, [runc, *args])
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv))

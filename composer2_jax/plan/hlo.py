"""Reading a compiled program's HLO text: its collectives with their bytes and replica groups (`collectives`), and
what the scheduled, post-optimisation HLO of a step says about MoE overlap (`moe_overlap`,
model.moe_overlap_chunks).

`moe_overlap(hlo_text)` reads `compiled.as_text()`: XLA prints a scheduled module's computations in schedule order,
every instruction with its operands and the metadata `op_name` (the JAX name stack). The MoE layer runs its
chunks under the name scopes `moe_chunk{i}/dispatch|experts|combine` (`model/expert_parallel.py: overlap_chunks`),
so the compiled program's all-to-alls and expert matmuls can be attributed to a chunk:

  * an all-to-all of chunk i: an `all-to-all` / `ragged-all-to-all` instruction (or `all-to-all-start` /
    an `async-start` wrapping one, on backends with asynchronous collectives) whose op_name holds `moe_chunk{i}/`;
  * an expert matmul of chunk j: a `dot` / `convolution` / matmul custom-call whose op_name holds
    `moe_chunk{j}/experts`, directly in a computation or inside a fusion / call / conditional / while it calls.

Both are grouped by `site`, the op_name before `moe_chunk` (one MoE layer in one pass: the forward
`jit(f)/jvp(MoE)/...` and the backward `jit(f)/transpose(jvp(MoE))/...` are different sites, as are layers of an
unrolled stack); the backward's all-to-alls legitimately depend on every chunk's forward output through the loss.
Dependence: inside each computation the data-dependency DAG (operands only; control edges are not data) is closed
transitively; an all-to-all of chunk i and an expert matmul of chunk j ≠ i at the same site are independent when
neither is an ancestor of the other. Schedule: for each all-to-all, how many expert matmuls the schedule places
between the op and its first use (its `-done` for an asynchronous one; get-tuple-element / bitcast / copy count
as no use). On XLA:CPU collectives are synchronous, so "between" is only an order, not concurrency; on a GPU's
asynchronous collectives the matmuls between a start and its done are what runs under the transfer.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Optional

import numpy as np

_A2A_OPS = ("all-to-all", "ragged-all-to-all", "all-to-all-start")
_DOT_OPS = ("dot", "convolution")
_GEMM_TARGETS = ("gemm", "matmul", "cublas", "ragged-dot", "ragged_dot")  # custom-call targets that are matmuls
_NO_USE_OPS = ("get-tuple-element", "bitcast", "copy", "tuple")
_CHUNK = re.compile(r"moe_chunk(\d+)/(dispatch|experts|combine)")
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*?)\s+([a-z][\w\-]*)\((.*)$")
_CALLS = re.compile(r"(?:calls|to_apply|body|condition|called_computations|branch_computations|"
                    r"true_computation|false_computation)=\{?([%\w.\-, ]+)\}?")


@dataclasses.dataclass
class Instr:
    """One HLO instruction: its operands, the computations it calls, its op_name and custom-call target."""

    name: str
    opcode: str
    operands: list
    calls: list
    op_name: str
    target: str


def parse_computations(hlo_text: str) -> dict[str, list[Instr]]:
    """{computation name: its instructions in printed (for a scheduled module: schedule) order}."""
    comps: dict[str, list[Instr]] = {}
    cur: Optional[list] = None
    for line in hlo_text.splitlines():
        if cur is None:
            m = re.match(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s*\(.*\{\s*$", line)
            if m:
                cur = comps.setdefault(m.group(1), [])
            continue
        if line.startswith("}"):
            cur = None
            continue
        m = _INSTR.match(line)
        if not m:
            continue
        name, opcode, rest = m.group(1), m.group(3), m.group(4)
        depth, i = 1, 0
        while i < len(rest) and depth:  # the operand list: up to the matching ')'
            depth += {"(": 1, ")": -1}.get(rest[i], 0)
            i += 1
        operands = re.findall(r"%([\w.\-]+)", rest[: i - 1])
        attrs = rest[i:]
        calls = [c.strip().lstrip("%") for g in _CALLS.findall(attrs) for c in g.split(",") if c.strip()]
        op_name = re.search(r'op_name="([^"]*)"', attrs)
        target = re.search(r'custom_call_target="([^"]*)"', attrs)
        cur.append(Instr(name, opcode, operands, calls, op_name.group(1) if op_name else "",
                         target.group(1) if target else ""))
    return comps


def _chunk_tag(op_name: str):
    """(site, chunk, phase) of an op_name inside `moe_chunk{i}/{phase}`, else None."""
    m = _CHUNK.search(op_name)
    return None if m is None else (op_name[: m.start()], int(m.group(1)), m.group(2))


def _is_dot(ins: Instr) -> bool:
    """A matmul: dot, convolution or a matmul custom-call."""
    return ins.opcode in _DOT_OPS or (ins.opcode == "custom-call" and any(t in ins.target.lower()
                                                                           for t in _GEMM_TARGETS))


def _is_a2a(ins: Instr, comps) -> bool:
    """An all-to-all, or an async-start wrapping one."""
    if ins.opcode in _A2A_OPS:
        return True
    return ins.opcode == "async-start" and any(i.opcode in _A2A_OPS for c in ins.calls for i in comps.get(c, ()))


@dataclasses.dataclass
class A2A:
    """One all-to-all of a chunk and where the schedule puts it."""

    computation: str
    name: str
    site: str
    chunk: int
    phase: str  # dispatch | combine
    expert_dots_before_use: int  # expert matmuls (any chunk) scheduled between the op and its first use
    other_chunk_dots_before_use: int  # ... of another chunk at the same site


def moe_overlap(hlo_text: str) -> dict:
    """The chunked MoE's all-to-alls and expert matmuls in a compiled module (module docstring).

    Returns dict(chunks (distinct chunk ids seen), a2a (list of `A2A` as dicts), pairs_checked (all-to-all ×
    other-chunk expert matmul pairs in one computation at one site), dependent (those where one depends on the
    other: [(a2a, dot, 'a2a_needs_dot' | 'dot_needs_a2a')]), independent (pairs_checked > 0 and no dependent),
    order ({computation:site: the schedule as tokens, A<chunk><d|c> an all-to-all of a chunk's dispatch or
    combine, E<chunk> its expert matmuls, repeats collapsed})).
    """
    comps = parse_computations(hlo_text)
    tags_of = _expert_dot_tags(comps)
    a2as, dependent, pairs, chunks, order = [], [], 0, set(), {}
    for comp, instrs in comps.items():
        a2a_at, dot_at = _chunk_positions(instrs, comps, tags_of)
        if not a2a_at:
            continue
        _add_order(order, comp, a2a_at, dot_at)
        index = {ins.name: i for i, ins in enumerate(instrs)}
        anc, users = _ancestors(instrs, index), _users(instrs, index)
        for pos, (site, chunk, phase) in a2a_at:
            chunks.add(chunk)
            use = _first_use(instrs, users, pos)
            between = [(p, tag) for p, tag in dot_at if use is not None and pos < p < use]
            a2as.append(A2A(comp, instrs[pos].name, site, chunk, phase, len(between),
                            sum(1 for _, (s, c) in between if s == site and c != chunk)))
            for dpos, (dsite, dchunk) in dot_at:
                if dsite != site or dchunk == chunk:
                    continue
                pairs += 1
                if anc[pos] >> dpos & 1:
                    dependent.append((instrs[pos].name, instrs[dpos].name, "a2a_needs_dot"))
                elif anc[dpos] >> pos & 1:
                    dependent.append((instrs[pos].name, instrs[dpos].name, "dot_needs_a2a"))
    return dict(chunks=sorted(chunks), a2a=[dataclasses.asdict(a) for a in a2as], pairs_checked=pairs,
                dependent=dependent, independent=bool(pairs) and not dependent,
                order={k: " ".join(v) for k, v in order.items()})


def _expert_dot_tags(comps):
    """`tags_of(computation)`: the {(site, chunk)} of the expert matmuls a computation holds, nested calls
    included (memoised over the module)."""
    dot_tags: dict[str, set] = {}

    def tags_of(comp: str, seen=()) -> set:
        if comp in dot_tags:
            return dot_tags[comp]
        out = set()
        for ins in comps.get(comp, ()):
            t = _chunk_tag(ins.op_name)
            if _is_dot(ins) and t and t[2] == "experts":
                out.add(t[:2])
            for c in ins.calls:
                if c not in seen and c != comp:
                    out |= tags_of(c, seen + (comp,))
        dot_tags[comp] = out
        return out

    return tags_of


def _chunk_positions(instrs, comps, tags_of) -> tuple[list, list]:
    """(all-to-alls as (position, (site, chunk, phase)), expert matmuls as (position, (site, chunk))) of one
    computation; an instruction that calls computations holding expert matmuls counts as those matmuls."""
    a2a_at, dot_at = [], []
    for i, ins in enumerate(instrs):
        t = _chunk_tag(ins.op_name)
        if t and _is_a2a(ins, comps):
            a2a_at.append((i, t))
        own = {t[:2]} if (t and _is_dot(ins) and t[2] == "experts") else set()
        for c in ins.calls:
            own |= tags_of(c)
        for tag in own:
            dot_at.append((i, tag))
    return a2a_at, dot_at


def _add_order(order: dict, comp: str, a2a_at, dot_at):
    """Per site of `comp`: all-to-alls (A<chunk><d|c>) and expert matmuls (E<chunk>) in order, repeats collapsed."""
    events = sorted([(p, t[0], f"A{t[1]}{t[2][0]}") for p, t in a2a_at]
                    + [(p, t[0], f"E{t[1]}") for p, t in dot_at])
    for _, site, ev in events:
        seq = order.setdefault(f"{comp}:{site}", [])
        if not seq or seq[-1] != ev:
            seq.append(ev)


def _ancestors(instrs, index) -> list[int]:
    """Each instruction's transitive operands in its computation, as a bitset over positions."""
    anc = [0] * len(instrs)
    for i, ins in enumerate(instrs):
        a = 0
        for o in ins.operands:
            j = index.get(o)
            if j is not None:
                a |= (1 << j) | anc[j]
        anc[i] = a
    return anc


def _users(instrs, index) -> dict[int, list]:
    """{position: positions of the instructions that use it as an operand}."""
    users: dict[int, list] = {}
    for i, ins in enumerate(instrs):
        for o in ins.operands:
            if o in index:
                users.setdefault(index[o], []).append(i)
    return users


def _first_use(instrs, users, i):
    """Position of the first real consumer of instruction i (through no-op wrappers), or None."""
    todo, best = list(users.get(i, ())), None
    while todo:
        u = todo.pop()
        if instrs[u].opcode in _NO_USE_OPS:
            todo.extend(users.get(u, ()))
        elif best is None or u < best:
            best = u
    return best


def schedule_summary(report: dict) -> dict:
    """Per (site kind, phase): all-to-alls, and how many have an expert matmul of another chunk scheduled before
    their first use (the order an asynchronous collective needs to overlap)."""
    out: dict[str, dict] = {}
    for a in report["a2a"]:
        key = ("backward" if "transpose(" in a["site"] else "forward") + "/" + a["phase"]
        s = out.setdefault(key, dict(all_to_alls=0, with_other_chunk_dots_before_use=0, expert_dots_before_use=0))
        s["all_to_alls"] += 1
        s["with_other_chunk_dots_before_use"] += a["other_chunk_dots_before_use"] > 0
        s["expert_dots_before_use"] += a["expert_dots_before_use"]
    return out


# ------------------------------------------------------------------ collectives and their bytes

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
               "ragged-all-to-all")
_DTYPE_BYTES = {"f32": 4, "bf16": 2, "f16": 2, "s32": 4, "u32": 4, "s8": 1, "u8": 1, "pred": 1, "f64": 8, "s64": 8,
                "u64": 8, "s16": 2, "u16": 2, "f8e4m3fn": 1, "f8e5m2": 1}


@dataclasses.dataclass
class Collective:
    """One collective op of the compiled program."""

    kind: str
    bytes: int  # result bytes per device
    group: int  # devices per replica group
    crosses_nodes: bool

    @property
    def wire_bytes(self) -> float:
        """Bytes each device sends for this op (ring algorithms)."""
        n = max(self.group, 1)
        frac = (n - 1) / n
        if self.kind == "all-reduce":
            return 2 * frac * self.bytes
        if self.kind == "collective-permute":
            return float(self.bytes)
        return frac * self.bytes


def _shape_bytes(shape_text: str) -> int:
    """Bytes of an HLO result type such as `bf16[8,128]{1,0}` or a tuple of them."""
    total = 0
    for dt, dims in re.findall(r"\b([a-z]+[0-9a-z]*)\[([0-9,]*)\]", shape_text):
        if dt in _DTYPE_BYTES:
            total += _DTYPE_BYTES[dt] * math.prod(int(d) for d in dims.split(",") if d)
    return total


def _groups(line: str) -> list[list[int]]:
    """Replica groups of an HLO collective line (explicit or iota form)."""
    m = re.search(r"replica_groups=\{(\{[0-9,{} ]*\})\}", line)
    if m:
        return [[int(x) for x in g.split(",") if x.strip()] for g in re.findall(r"\{([0-9, ]*)\}", m.group(1))]
    m = re.search(r"replica_groups=\[([0-9,]+)\]<=\[([0-9,]+)\](T\(([0-9,]+)\))?", line)
    if m:
        shape = [int(x) for x in m.group(1).split(",")]
        dims = [int(x) for x in m.group(2).split(",")]
        ids = np.arange(math.prod(dims)).reshape(dims)
        if m.group(4):
            ids = ids.transpose([int(x) for x in m.group(4).split(",")])
        return ids.reshape(shape).tolist()
    m = re.search(r"source_target_pairs=\{([0-9,{} ]*)\}", line)
    if m:
        return [[int(a), int(b)] for a, b in re.findall(r"\{(\d+),(\d+)\}", m.group(1))]
    return []


def collectives(hlo_text: str, node_size: int) -> list[Collective]:
    """Collective ops in compiled HLO text with their result bytes and group sizes."""
    out = []
    for line in hlo_text.splitlines():
        m = re.search(r"=\s*(.+?)\s+(" + "|".join(COLLECTIVES) + r")(-start)?\(", line)
        if not m or "-done" in line.split("=")[0]:
            continue
        groups = _groups(line)
        size = len(groups[0]) if groups and m.group(2) != "collective-permute" else 2
        crosses = any(len({d // node_size for d in g}) > 1 for g in groups)
        out.append(Collective(m.group(2), _shape_bytes(m.group(1)), size, crosses))
    return out


def _by_kind(colls) -> dict:
    """{collective kind: count, result bytes and wire bytes} of `colls`."""
    agg: dict[str, dict] = {}
    for c in colls:
        a = agg.setdefault(c.kind, {"count": 0, "bytes": 0, "wire_bytes": 0.0})
        a["count"] += 1
        a["bytes"] += c.bytes
        a["wire_bytes"] += c.wire_bytes
    return agg


# ------------------------------------------------------------------ the pipeline schedule's loops

_SCHEDULE_LOOP = re.compile(r"\swhile\(.*op_name=\"[^\"]*_pipelined_stack\)*/(?:(?!while)[^\"])*while\"")
_TRIP_COUNT = re.compile(r"\"known_trip_count\":\{\"n\":\"(\d+)\"")


def schedule_trip_counts(hlo_text: str) -> list[int]:
    """Trip counts of the pipeline schedule's loops in a compiled module (model/pipeline.py; the forward loop and
    the backward one autodiff derives from it), in module order: the `while` ops traced directly under
    `_pipelined_stack` (the units' scans nested inside carry `.../while/...` and are not counted), with the trip
    count XLA proved (`known_trip_count`). A schedule loop without a proved trip count is an error naming it."""
    out = []
    for line in hlo_text.splitlines():
        if not _SCHEDULE_LOOP.search(line):
            continue
        m = _TRIP_COUNT.search(line)
        if m is None:
            name = line.split("=")[0].strip()
            raise ValueError(f"the schedule loop {name} has no known_trip_count in its backend_config")
        out.append(int(m.group(1)))
    return out

"""The RL run's schema: the `rl`, `env` and `sft` sections and the whole experiment (`RLExperimentConfig`).

The other sections are the services' own dataclasses (rollout: `RolloutConfig`, trainer: `TrainerConfig`, loss:
`PolicyLossConfig`, reward: `RewardConfig`, harness: `HarnessConfig`). experiments/rl.py derives its ConfigDict from
`RLExperimentConfig`; `run_rl` converts it back once and hands the frozen result to every service — embedded
threads and Ray actors alike (it pickles), never a ConfigDict or JSON re-parsed on the far side.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from composer2_jax.data.tokenizer import TokenizerConfig
from composer2_jax.env.harness import HarnessConfig
from composer2_jax.env.tool_schemas import TOOL_NAMES
from composer2_jax.losses.rl import PolicyLossConfig
from composer2_jax.model.attention_memory import check_attention_memory
from composer2_jax.model_config import ModelConfig
from composer2_jax.model_config import preset as model_preset
from composer2_jax.rl.branching import TreeConfig
from composer2_jax.rl.rewards import RewardConfig
from composer2_jax.rl.services.rollout import RolloutConfig
from composer2_jax.rl.services.trainer import RL_LOSS, TrainerConfig
from composer2_jax.rl.sources import SourcesConfig, parse_mix
from composer2_jax.train.checkpoint import CheckpointConfig
from composer2_jax.train.metrics import LogConfig
from composer2_jax.train.optim import OptimConfig

BACKENDS = ("local", "ray")
PLACEMENTS = ("shared", "colocated", "disaggregated")
GROUP_MODES = ("plain", "tree")
WEIGHT_SYNCS = ("object_store", "device")  # rl.ray.weight_sync


@dataclasses.dataclass(frozen=True)
class RayConfig:
    """backend=ray: actors and where they go (launch/ray_cluster.sh gives nodes these resources)."""

    address: str = ""  # "" = start a local cluster; "auto" = join the cluster this node belongs to
    rollout_actors: int = 1  # inference engines
    env_actors: int = 2  # environment hosts
    # the weight registry (head node)
    registry_resources: dict[str, Any] = dataclasses.field(default_factory=lambda: dict(num_cpus=0))
    # per RolloutActor: Ray actor options (num_cpus, num_gpus, custom resources; zero custom resources are dropped)
    rollout_resources: dict[str, Any] = dataclasses.field(
        default_factory=lambda: dict(num_cpus=0, num_gpus=0, resources=dict(rollout=0)))
    # CPU hosts: each RolloutActor process gets this many XLA host devices of its own (0 = the platform's devices;
    # on GPU nodes rollout_resources.num_gpus gives the process its GPUs); rollout.devices/mesh index them
    rollout_host_devices: int = 0
    # publish each version after the first as a delta from the previous one (weight_delta.py: XOR+zlib, changed
    # indices+values or raw per leaf, whichever is smallest; bit-exact); an actor that missed a version resyncs in full
    weight_deltas: bool = False
    # trainer → RolloutActor weights: "object_store" (host arrays through Ray's object store, the default) or
    # "device": the driver and the rollout actors are one jax.distributed job (driver process 0, actor i process
    # i + 1; start the driver with C2J_COORDINATOR, C2J_NUM_PROCESSES = rollout_actors + 1, C2J_PROCESS_ID=0) and
    # a collective moves each version device to device (rl/services/device_sync.py)
    weight_sync: str = "object_store"
    # per EnvActor: Ray actor options (0 = no requirement)
    env_resources: dict[str, Any] = dataclasses.field(
        default_factory=lambda: dict(num_cpus=0, resources=dict(sandbox=0)))

    def __post_init__(self):
        if self.rollout_actors < 1 or self.env_actors < 1 or self.rollout_host_devices < 0:
            raise ValueError(f"rl.ray.rollout_actors={self.rollout_actors}, env_actors={self.env_actors}, "
                             f"rollout_host_devices={self.rollout_host_devices}; expected >= 1, >= 1, >= 0")
        if self.weight_sync not in WEIGHT_SYNCS:
            raise ValueError(f"rl.ray.weight_sync={self.weight_sync!r}; expected one of {WEIGHT_SYNCS}")
        if self.weight_sync == "device" and self.weight_deltas:
            raise ValueError("rl.ray.weight_deltas applies to weight_sync='object_store'; the device path sends "
                             "whole versions")


@dataclasses.dataclass(frozen=True)
class LoopConfig:
    """How the orchestrator drives episodes (rl/services/local.py)."""

    episode_threads: int = 32  # episodes in flight at once (≥ the rollout batch keeps the engine full)
    max_retries: int = 1  # retries of an episode whose sandbox or rollout call failed
    min_group: int = 2  # groups with fewer surviving episodes are dropped
    take_timeout_s: float = 600.0  # the trainer gives up (error naming the counters) after waiting this long
    max_dropped_in_a_row: int = 64  # this many episodes dropped with no success between them stop the run (an
    # error naming the last failure), instead of admitting groups that can only fail until take_timeout_s

    def __post_init__(self):
        if self.episode_threads < 1 or self.max_retries < 0 or self.min_group < 1 or self.take_timeout_s <= 0 \
                or self.max_dropped_in_a_row < 1:
            raise ValueError(f"rl.loop {self}: expected episode_threads >= 1, max_retries >= 0, min_group >= 1, "
                             f"take_timeout_s > 0, max_dropped_in_a_row >= 1")


@dataclasses.dataclass(frozen=True)
class RLConfig:
    """The RL loop: backend, staleness, batch, the task family and held-out evaluation."""

    backend: str = "local"  # local (threads in one process) | ray (actors, launch/ray_cluster.sh)
    # where trainer and rollout engines run (docs/rl.md "RL at scale"): shared (rollout.devices inside the trainer's,
    # both running at once: the single-device toy run) | colocated (the same devices, time-shared: the engines'
    # page pools and the optimizer state are never resident together) | disaggregated (disjoint device sets)
    placement: str = "shared"
    eta: int = 2  # staleness bound η: a sample of version v trains version t only if t − v ≤ η (0 = synchronous)
    steps: int = 100  # weight versions to train
    groups_per_batch: int = 8  # G: tasks per version
    samples: int = 4  # rollouts per task (the Dr. GRPO group; group_mode=tree: unused)
    # plain: `samples` episodes from the task's start | tree: branching rollouts (rl/branching.py)
    group_mode: str = "plain"
    tree: TreeConfig = TreeConfig()  # group_mode=tree: initial episodes, branches per pick, token budget, node choice
    loop: LoopConfig = LoopConfig()  # how the orchestrator drives episodes (threads, retries, dropped groups)
    episode_threads: int = 32  # evaluation episodes in flight
    train_tasks: int = 4000  # size of the generated training task list (rl/tasks.py)
    task_seed: int = 0  # seed of the training task list
    heldout_seed: int = 1_000_000  # seed of the held-out task list (a disjoint content split)
    levels: tuple[int, ...] = (0, 1, 2, 3)  # difficulty levels of the task family (rl/tasks.py)
    eval_tasks: int = 64  # held-out tasks per evaluation
    eval_samples: int = 2  # episodes per held-out task
    eval_every: int = 50  # evaluate at version 0 and every N versions after it (0 = no held-out evaluation)
    plot: bool = True  # write workdir/curves.png at the end
    ray: RayConfig = RayConfig()  # backend=ray: actors and their placement

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise ValueError(f"rl.backend={self.backend!r}; expected one of {BACKENDS}")
        if self.eta < 0:
            raise ValueError(f"rl.eta={self.eta}; expected >= 0 (0 = the synchronous loop)")
        if self.placement not in PLACEMENTS:
            raise ValueError(f"rl.placement={self.placement!r}; expected one of {PLACEMENTS}")
        if self.placement == "colocated" and self.backend != "local":
            raise ValueError(f"rl.placement='colocated' time-shares one process's devices; it runs on the local "
                             f"backend only, got backend={self.backend!r}")
        if self.group_mode not in GROUP_MODES:
            raise ValueError(f"rl.group_mode={self.group_mode!r}; expected one of {GROUP_MODES}")
        if min(self.steps, self.groups_per_batch, self.samples, self.episode_threads) < 1:
            raise ValueError(f"rl.steps={self.steps}, groups_per_batch={self.groups_per_batch}, samples="
                             f"{self.samples}, episode_threads={self.episode_threads}; expected >= 1")
        if self.samples < self.loop.min_group:
            raise ValueError(f"rl.samples={self.samples} < rl.loop.min_group={self.loop.min_group}: every group "
                             f"would be dropped")
        if self.eval_every < 0 or self.eval_tasks < 1 or self.eval_samples < 1:
            raise ValueError(f"rl.eval_every={self.eval_every}, eval_tasks={self.eval_tasks}, eval_samples="
                             f"{self.eval_samples}; expected >= 0, >= 1, >= 1")


def check_placement(placement: str, tc: TrainerConfig, rc: RolloutConfig, backend: str = "local") -> None:
    """ValueError unless the trainer's and the rollout engines' device ranges fit the placement (naming both). On the
    ray backend the rollout engines live in RolloutActor processes: their device indices are that process's own."""
    if placement == "shared" or backend == "ray":
        return
    if tc.devices == 0:
        raise ValueError(f"rl.placement={placement!r} needs trainer.devices set (0 = every device leaves the "
                         f"placement unchecked); expected the trainer's device count")
    trainer, rollout = range(tc.devices), rc.device_ids()
    where = (f"trainer devices [0, {tc.devices}) and rollout devices [{rollout.start}, {rollout.stop}) "
             f"(rollout.first_device={rc.first_device}, devices={rc.devices})")
    if placement == "disaggregated" and set(trainer) & set(rollout):
        raise ValueError(f"rl.placement='disaggregated' but the {where} overlap; expected disjoint device sets")
    if placement == "colocated" and trainer != rollout:
        raise ValueError(f"rl.placement='colocated' but the {where} differ; expected the same devices")


@dataclasses.dataclass(frozen=True)
class EnvConfig:
    """The environment the episodes run in: tools the model sees, sandbox pool, time limits."""

    tools: tuple[str, ...] = ("read_file", "edit_file", "submit")  # tool names offered (env/tool_schemas.py)
    # tools of the Harbor-folder kinds (suite:, generated:): the deploy harness's (experiments/evaluate.py) full set
    harbor_tools: tuple[str, ...] = TOOL_NAMES
    schemas_in_prompt: bool = False  # put the tool JSON schemas into the system prompt
    pool_size: int = 16  # sandboxes kept started in advance
    grade_timeout_s: float = 30.0  # wall-clock limit of the hidden check
    command_timeout_s: float = 30.0  # default limit of one run_terminal_cmd

    def __post_init__(self):
        if not self.tools or not self.harbor_tools:
            raise ValueError("env.tools or env.harbor_tools is empty; expected at least one tool name")
        unknown = sorted(set(self.tools + self.harbor_tools) - set(TOOL_NAMES))
        if unknown:
            raise ValueError(f"env tools {unknown} are unknown; expected names from {TOOL_NAMES}")
        if self.pool_size < 0 or self.grade_timeout_s <= 0 or self.command_timeout_s <= 0:
            raise ValueError(f"env.pool_size={self.pool_size}, grade_timeout_s={self.grade_timeout_s}, "
                             f"command_timeout_s={self.command_timeout_s}; expected >= 0, > 0, > 0")


@dataclasses.dataclass(frozen=True)
class WarmStartConfig:
    """The SFT warm start on oracle transcripts (experiments/sft.py), trained when `init_from` holds nothing."""

    transcripts: int = 1500  # oracle episodes recorded through the real sandboxes
    read_prob: float = 0.5  # fraction of oracle episodes that read the file before fixing it
    # fraction of demonstrations in which the oracle writes a wrong operator (kept unverified): the SFT start
    # inherits it and RL, which sees the hidden tests, must rise above its teacher
    teacher_error: float = 0.0
    # Habits the hidden check cannot see (rl.tasks.TEACHER_FLAWS, drawn independently), which the readability and
    # todo_comments terms punish: the fraction of demonstrations whose fix adds a lint finding (ruff E703)
    teacher_lint: float = 0.0
    teacher_todo_comment: float = 0.0  # ... and the fraction whose fix adds a TODO comment
    # pkg family only (rl/pkg_tasks.py oracle_replies): the oracle re-runs the tests in the turn of each fix, so every
    # read copies the first FAIL line just printed (2k + 1 turns); False: one run first, one before submitting
    teacher_retest: bool = False
    seed: int = 0  # seed of the transcript task list and the oracle's choices
    steps: int = 2000  # SFT steps
    lr: float = 2e-5  # SFT peak learning rate
    seq_len: int = 1024  # SFT packed row length
    batch_size: int = 8  # SFT rows per step
    # The last `mtp_steps` of `steps` train the whole model with its MTP depths, grown fresh onto a trunk trained
    # alone (no depths) for the first steps − mtp_steps; 0: one run with the depths throughout. On 2 cores the small
    # preset's two depths are half of its step (docs/rl.md, "A warm start in about 22 minutes").
    mtp_steps: int = 0
    mtp_lr: float = 0.0  # peak learning rate of those last mtp_steps (0: `lr`)
    init_from: str = ""  # checkpoint the SFT starts from ("" = a fresh model)
    # what the warm start imitates: "family" (the curriculum's generated family's oracle, rl/services/oracle.py),
    # "solutions" (each training Harbor task's solution/solve.sh replayed as terminal tool calls in its sandbox), or
    # the path of a JSONL of transcripts ({"messages": [...]} per line) used as it is
    demonstrations: str = "family"

    @property
    def flaw_rates(self) -> dict[str, float]:
        """{rl.tasks.TEACHER_FLAWS name: fraction of demonstrations with it}."""
        return {"lint": self.teacher_lint, "todo_comment": self.teacher_todo_comment}

    def __post_init__(self):
        for name in ("read_prob", "teacher_error", "teacher_lint", "teacher_todo_comment"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"sft.{name}={getattr(self, name)}; expected a fraction in [0, 1]")
        if self.demonstrations not in ("family", "solutions") and not self.demonstrations.endswith(".jsonl"):
            raise ValueError(f"sft.demonstrations={self.demonstrations!r}; expected 'family', 'solutions' or the path "
                             "of a .jsonl of transcripts")
        if min(self.transcripts, self.steps, self.seq_len, self.batch_size) < 1:
            raise ValueError(f"sft.transcripts={self.transcripts}, steps={self.steps}, seq_len={self.seq_len}, "
                             f"batch_size={self.batch_size}; expected >= 1")
        if not 0 <= self.mtp_steps < self.steps or self.mtp_lr < 0:
            raise ValueError(f"sft.mtp_steps={self.mtp_steps}, mtp_lr={self.mtp_lr} with steps={self.steps}; expected "
                             "0 <= mtp_steps < steps (the trunk trains alone first) and mtp_lr >= 0")


@dataclasses.dataclass(frozen=True)
class RLExperimentConfig:
    """Stage 4: asynchronous RL from the SFT warm start (the schema of experiments/rl.py's config)."""

    preset: str = "toy"  # which architecture/run-size preset this config was built from
    model: ModelConfig = model_preset("toy")  # the architecture (composer2_jax/model_config.py)
    optim: OptimConfig = OptimConfig()  # the trainer's optimizer (train/optim.py)
    tokenizer: TokenizerConfig = TokenizerConfig()  # byte | tiktoken, and its file
    workdir: str = "runs/toy/rl"  # checkpoints/, logs/ and curves.png; an existing checkpoint there is resumed
    init_from: str = ""  # version 0 = these weights (the SFT warm start; trained by `sft` when empty of checkpoints)
    seed: int = 0  # trainer init and curriculum seed
    checkpoint: CheckpointConfig = CheckpointConfig()  # every N versions (and at the end)
    log: LogConfig = LogConfig()  # metrics.jsonl / TensorBoard under workdir/logs
    rl: RLConfig = RLConfig()  # the loop, the toy task family and evaluation
    # the curriculum: SOURCE[@WEIGHT],… with SOURCE toy | suite:VERSION_OR_DIR | generated:DIR (rl/sources.py)
    tasks: str = "toy"
    sources: SourcesConfig = SourcesConfig()  # held-out split and generator settings of the task sources
    rollout: RolloutConfig = RolloutConfig()  # fixed engine shapes and sampling (rl/services/rollout.py)
    trainer: TrainerConfig = TrainerConfig()  # packed batch layout of the updates (rl/services/trainer.py)
    loss: PolicyLossConfig = RL_LOSS  # the policy objective (losses/rl.py): decoupled PPO, Dr. GRPO normaliser
    reward: RewardConfig = RewardConfig()  # success − length penalty + auxiliary terms (rl/rewards.py)
    harness: HarnessConfig = HarnessConfig()  # episode limits and prompts (env/harness.py)
    env: EnvConfig = EnvConfig()  # tools, sandbox pool, time limits
    sft: WarmStartConfig = WarmStartConfig()  # the warm start trained when init_from holds no checkpoint

    def __post_init__(self):
        if not self.workdir:
            raise ValueError("workdir is empty; expected a directory for checkpoints/ and logs/")
        parse_mix(self.tasks)  # a bad curriculum string fails here, naming the entry
        if self.rl.group_mode == "tree" and self.harness.max_summaries > 0:
            raise ValueError(f"rl.group_mode='tree' with harness.max_summaries={self.harness.max_summaries}: a "
                             "self-summary restarts the context, which a tree path cannot express; expected "
                             "harness.max_summaries=0 (an episode that fills harness.context_budget then ends with "
                             "stop reason summary_limit) and a context_budget that holds a whole episode")
        check_attention_memory(self.model.attention_kernel, self.trainer.seq_len, self.trainer.rows,
                               self.model.num_heads)
        if self.sft.mtp_steps and not self.model.num_mtp_layers:
            raise ValueError(f"sft.mtp_steps={self.sft.mtp_steps} trains the MTP depths last, but "
                             "model.num_mtp_layers=0; expected sft.mtp_steps=0 for a model without MTP depths")
        check_placement(self.rl.placement, self.trainer, self.rollout, self.rl.backend)
        reply = max(self.harness.max_new_tokens, self.harness.summary_tokens)
        if reply > self.rollout.max_new_tokens:
            raise ValueError(f"harness replies of up to {reply} tokens (max_new_tokens / summary_tokens) exceed "
                             f"rollout.max_new_tokens={self.rollout.max_new_tokens}")

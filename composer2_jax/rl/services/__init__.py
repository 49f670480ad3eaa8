"""The RL services (docs/rl.md): trainer, rollout workers, environment workers, evaluator, and their orchestration.

    trainer.py / rl_step.py      decoupled PPO on Dr. GRPO advantages with router replay; versioned weights
    rollout.py / routing.py      the inference engine for many concurrent episodes; log μ, routing, version per reply
    env_worker.py                sandboxes: task → fork → episode (harness) → grading (rl/grading.py) → reward
    evaluator.py                 held-out tasks with a fixed version, nothing trained
    weights.py / weight_delta.py publication by version; bf16 delta statistics
    staleness.py / buffer.py     bounded staleness η: admission control and the group buffer
    local.py                     the embedded orchestrator (threads + queues, one process)
    ray_actors.py / ray_loop.py  the same services as Ray actors
    oracle.py                    SFT warm-start transcripts from the oracle through the real harness
    testing.py                   stand-ins (scripted rollout, counting trainer, faulty env, micro model) for tests
"""

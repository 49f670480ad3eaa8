"""Task authoring: what writes and checks the suites' tasks, apart from what runs and grades them.

    generate_stdlib.py  feature-deletion tasks from standard-library modules and their Lib/test tests
    generate_package.py feature-deletion tasks from any pure-Python package and its own unittest tests
    negatives.py        wrong-but-plausible patches a task's verifier must reject, and the agent applying one
    forgeries.py        a zoo of forging policies: workspace edits that try to pass a hidden check without the task
    sdist_repo.py       a real-repository task's starting repository from its sha256-pinned sdist (+ history)
"""

"""The agent-harness CLIs envhub runs headless: specs, install, one run (see specs.py, install.py, headless.py)."""

from evals.harnesses.headless import HarnessOutcome, Wrapper, run_headless
from evals.harnesses.install import default_cache_dir, find, harness_named, install, installed
from evals.harnesses.specs import HARNESSES, RUN_HEADER, Command, Harness, HarnessRun, Installed

__all__ = [
    "HARNESSES",
    "RUN_HEADER",
    "Command",
    "Harness",
    "HarnessOutcome",
    "HarnessRun",
    "Installed",
    "Wrapper",
    "default_cache_dir",
    "find",
    "harness_named",
    "install",
    "installed",
    "run_headless",
]

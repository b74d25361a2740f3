"""The trainer's own virtualenv (TRL, transformers, a CPU torch), kept apart from envhub's and cached by the hash of
examples/requirements-trl.txt: the tests that run a real GRPOTrainer use its python.

`python3 tests/trainer_venv.py` builds it (about 2 minutes and 1.7 GB); .ci/run does so in the background. Plain
standard library, so any Python 3.11 runs it before envhub's own virtualenv exists.
"""

import fcntl
import hashlib
import os
import subprocess
import sys
from pathlib import Path

REQUIREMENTS = Path(__file__).resolve().parent.parent / "examples" / "requirements-trl.txt"
_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "envhub"


def venv_dir() -> Path:
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:12]
    return _CACHE / f"trainer-{digest}"


def ready(venv: Path) -> bool:
    return (venv / ".complete").is_file()


def build() -> Path:
    """The venv's python, installing it first if no complete copy exists; one build at a time (xdist workers)."""
    venv = venv_dir()
    _CACHE.mkdir(parents=True, exist_ok=True)
    with open(_CACHE / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ready(venv):
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
            # pip, not uv: pip takes a local CPU build of torch where the machine offers one (uv would fetch CUDA's).
            pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-qq", "install"]
            subprocess.run([*pip, "-r", str(REQUIREMENTS)], check=True)
            (venv / ".complete").touch()
    return venv / "bin" / "python"


if __name__ == "__main__":
    print(build())

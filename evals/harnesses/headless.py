"""One headless run of a harness CLI: its configuration written into a scratch home, the CLI started in a process
group of its own, held to a wall-time limit (past it the whole group is killed), and the home deleted after."""

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from evals.harnesses.install import find
from evals.harnesses.specs import Command, Harness, HarnessRun

__all__ = ["HarnessOutcome", "Wrapper", "run_headless"]

TAIL_BYTES = 8192
# Given the configured command (its files written in its home), returns the command to start: the caller's way to
# run it as another user, in a sandbox's view of the machine.
Wrapper = Callable[[Command], Command]


@dataclass(frozen=True)
class HarnessOutcome:
    harness: str
    pid: int  # of the process it was started as, whose process group it led
    exit_status: int | None  # None when it was killed at the wall-time limit
    duration_s: float
    stdout_tail: str
    stderr_tail: str
    timed_out: bool
    code: str  # "" when it exited 0; harness_timeout; harness_failed (another exit status)

    @property
    def ok(self) -> bool:
        return self.code == ""


def run_headless(
    harness: Harness,
    run: HarnessRun,
    *,
    cache_dir: Path,
    wall_s: float,
    scratch_dir: Path | None = None,
    wrap: Wrapper | None = None,
) -> HarnessOutcome:
    """Run the CLI once to its end or to wall_s, whichever comes first; harness_missing when it is not installed.

    scratch_dir: where its scratch home is made (the system's temporary folder by default); wrap: see Wrapper.
    """
    installed = find(harness, cache_dir)
    home = Path(tempfile.mkdtemp(prefix=f"envhub-{harness.name}-", dir=scratch_dir))
    try:
        command = harness.configure(run, home, installed)
        if wrap is not None:
            command = wrap(command)
        with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
            started = time.monotonic()
            pid, exit_status = _run(command, stdout, stderr, wall_s)
            duration_s = time.monotonic() - started
            tails = _tail(stdout), _tail(stderr)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    timed_out = exit_status is None
    code = "harness_timeout" if timed_out else "" if exit_status == 0 else "harness_failed"
    return HarnessOutcome(harness.name, pid, exit_status, duration_s, *tails, timed_out=timed_out, code=code)


def _run(command: Command, stdout: IO[bytes], stderr: IO[bytes], wall_s: float) -> tuple[int, int | None]:
    """Its pid, and its exit status or None when the wall-time limit came first. Whatever the CLI left running in
    its process group (a server it started, a tool's child) is killed either way."""
    uid, gid = command.user if command.user is not None else (None, None)
    process = subprocess.Popen(
        command.argv,
        env=command.env,
        cwd=command.cwd,
        stdin=subprocess.DEVNULL,  # Codex and Qwen Code read a prompt from stdin when it is open
        stdout=stdout,
        stderr=stderr,
        pass_fds=command.pass_fds,
        start_new_session=True,  # its own process group, killed as a whole
        user=uid,
        group=gid,
        extra_groups=[] if uid is not None else None,
    )
    for fd in command.pass_fds:
        os.close(fd)  # the child has its copies
    try:
        status: int | None = process.wait(timeout=wall_s)
    except subprocess.TimeoutExpired:
        status = None
    finally:
        _kill_group(process.pid)
        process.wait()
    return process.pid, status


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # the group is gone already
        os.killpg(pgid, signal.SIGKILL)


def _tail(output: IO[bytes]) -> str:
    size = output.seek(0, os.SEEK_END)
    output.seek(max(0, size - TAIL_BYTES))
    return output.read().decode(errors="replace")

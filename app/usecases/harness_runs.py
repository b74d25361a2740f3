"""A harness CLI's headless run as envhub's job: kept from envhub as the process backend keeps its servers.

When envhub runs as root, the CLI runs as the servers' unprivileged user (ENVHUB_PROCESS_USER), in a scratch home
it owns under the process backend's homes folder, and with bubblewrap in a view of the machine that shows the
system, the CLI's install folder and its home alone (not envhub's data folder, whose database holds the sealed
model keys). The view has processes of its own, and the CLI is its first: when it is killed, all it started goes
with it. The view shares the machine's network, since the CLI reaches envhub's doors on the loopback. When envhub
is not root there is nobody to drop to: the CLI runs as envhub's own user.
"""

import os
from dataclasses import replace
from pathlib import Path

from app.settings import Settings
from evals.harnesses import Command, HarnessOutcome, HarnessRun, Wrapper, harness_named, run_headless
from hosting.runtimes.confinement import Confinement, ServerUser
from hosting.runtimes.views import View, wrap

__all__ = ["confined", "run_harness"]


def run_harness(
    settings: Settings, confinement: Confinement, harness: str, run: HarnessRun, wall_s: float | None = None
) -> HarnessOutcome:
    """One run of the named harness, held to wall_s and ENVHUB_HARNESS_WALL_S at most; harness_missing when it is
    not installed."""
    confinement.prepare()
    return run_headless(
        harness_named(harness),
        run,
        cache_dir=settings.harness_dir,
        wall_s=min(wall_s or settings.harness_wall_s, settings.harness_wall_s),
        scratch_dir=confinement.homes,
        wrap=confined(confinement),
    )


def confined(confinement: Confinement) -> Wrapper | None:
    """The wrapper that runs a CLI as the servers' user (in a view when bubblewrap is there); None when envhub is
    not root."""
    user = confinement.user()
    if user is None:
        return None
    bwrap = confinement.bubblewrap()

    def as_user(command: Command) -> Command:
        _give(command.home, user)
        if bwrap is None:  # then the user must be able to read the install folder on the machine itself
            return replace(command, user=(user.uid, user.gid))
        view = View(read=command.reads, write=(command.home,))
        drop = (user.uid, user.gid)
        # In bubblewrap's process group, so that killing the group kills the CLI, the first of the view's processes.
        wrapped = wrap(bwrap, view, command.argv, command.env, cwd=command.cwd, drop_to=drop, new_session=False)
        return replace(command, argv=wrapped.argv, env=wrapped.env, pass_fds=tuple(wrapped.fds))

    return as_user


def _give(home: Path, user: ServerUser) -> None:
    """The home and what was written in it (the CLI's configuration) to the user."""
    for folder, folders, files in os.walk(home):
        os.chown(folder, user.uid, user.gid)
        for name in [*folders, *files]:
            os.chown(os.path.join(folder, name), user.uid, user.gid, follow_symlinks=False)

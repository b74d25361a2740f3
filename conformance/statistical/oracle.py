"""A declared `script` oracle, played where openenv's rule runs it: inside the environment's image beside its server
(`python LOCATION SEED` prints JSON with "reward"), one seed at a time, its container removed on every path."""

import json
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openenv.validation.manifest import ExecutionDeclaration, ResourceDeclaration
from openenv.validation.providers import ProviderError, ValidationProvider
from openenv.validation.runtime.contracts import LaunchSpec
from pydantic import ValidationError

__all__ = ["PLAYED", "OracleRun", "play_oracle", "unplayable"]

PLAYED = "played"
MAX_STARTUP_S = 300.0  # the longest startup deadline openenv's LaunchSpec takes
KILLED = 137  # coreutils' timeout -s KILL: the script ran past its episode timeout


@dataclass(frozen=True)
class OracleRun:
    """What the declared oracle scored per seed, or the stable reason it was not played (`reason` is then not
    PLAYED) with what failed in `detail`."""

    form: str
    location: str
    reason: str = PLAYED
    detail: str = ""
    seeds: tuple[int, ...] = ()
    rewards: tuple[float, ...] = ()


def unplayable(oracle: dict[str, Any], folder: Path | None, provider: object | None) -> OracleRun | None:
    """Why the oracle cannot be played here, before anything is built; None when it can be tried."""
    form, location = str(oracle.get("form")), str(oracle.get("location"))
    if form != "script":
        return OracleRun(form, location, "injected_state", "envhub plays script oracles only: no set_state hook")
    if folder is None:
        return OracleRun(form, location, "no_folder", "envhub has no files of the environment at this revision")
    if provider is None:
        return OracleRun(form, location, "no_docker", "no Docker engine answers: the oracle runs in the image")
    return None


def play_oracle(
    provider: ValidationProvider,
    folder: Path,
    validation: dict[str, Any],
    seeds: Sequence[int],
    startup_timeout_s: float,
) -> OracleRun:
    """Build the folder's image, start it as its declared resources allow (answering /health within
    `startup_timeout_s`, at most openenv's 300 s), run the script once per seed (each bounded
    by `resources.episode_timeout_s`; envhub's provider kills it there), and remove the container. Blocking: run it
    in a worker thread."""
    oracle = validation["capabilities"]["oracle"]
    form, location = str(oracle["form"]), str(oracle["location"])
    try:
        execution = ExecutionDeclaration.model_validate(validation.get("execution") or {})
        resources = ResourceDeclaration.model_validate(validation.get("resources") or {})
    except ValidationError as exc:
        detail = f"validation.execution and validation.resources must be declared to build and run the image: {exc}"
        return OracleRun(form, location, "undeclared_execution", detail[:500])
    try:
        image = provider.build(folder, execution)
    except ProviderError as exc:
        return OracleRun(form, location, "build_failed", str(exc)[-500:])
    spec = {
        "image_ref": image,
        "resources": resources,
        "network": {},
        "run_id": f"oracle-{uuid.uuid4().hex[:12]}",
        "startup_timeout_s": min(startup_timeout_s, MAX_STARTUP_S),
    }
    try:
        subject = provider.start(LaunchSpec.model_validate(spec))
    except ProviderError as exc:
        return OracleRun(form, location, "start_failed", str(exc)[-500:])
    rewards: list[float] = []
    try:
        for seed in seeds:
            ran = subject.exec(["python", location, str(seed)], timeout_s=resources.episode_timeout_s)
            if ran.exit_code == KILLED:
                limit = resources.episode_timeout_s
                detail = f"seed {seed} ran past validation.resources.episode_timeout_s ({limit:g} s)"
                return OracleRun(form, location, "timeout", detail)
            reward = _reward(ran.stdout)
            if ran.exit_code != 0 or reward is None:
                detail = f"seed {seed}: exit code {ran.exit_code}, printed {ran.stdout[-200:]!r}: {ran.stderr[-300:]}"
                return OracleRun(form, location, "script_failed", detail)
            rewards.append(reward)
    except ProviderError as exc:
        return OracleRun(form, location, "script_failed", str(exc))
    finally:
        subject.stop()
    return OracleRun(form, location, PLAYED, "", tuple(seeds), tuple(rewards))


def _reward(printed: str) -> float | None:
    """The "reward" of the JSON object the script printed last, when it is a finite number."""
    lines = [line for line in printed.splitlines() if line.strip()]
    try:
        answer = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        return None
    reward = answer.get("reward") if isinstance(answer, dict) else None
    if isinstance(reward, int | float) and not isinstance(reward, bool) and math.isfinite(reward):
        return float(reward)
    return None

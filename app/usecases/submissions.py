"""The board's queue: submissions checked a few at a time, each through named stages with their own timeouts.

A stage is an async function over one submission's context (`Run`): it may give a verdict, file report ids and
fill the figures the board ranks by (the statistical stage's). Stages run in the order of `stages()`; adding one is
a line there. The first stage that cannot run (an error, or its timeout) ends the submission `failed` with a stable
code; otherwise it is `done` with the worst of the verdicts. An endpoint the launch stage started is stopped on every
path. Submissions left running by an envhub that stopped are queued again when one starts.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from app.settings import Settings
from app.usecases.quality import hosted
from app.usecases.statistics import Statistics, StatisticsRequest
from app.usecases.validation import Validations
from catalog.models import Source, Verdict
from catalog.store import read_environment
from catalog.submissions import Submission, SubmissionStatus, claim, finish, note, requeue, submit
from conformance.checker import Checker
from conformance.report import Report, RunStatus
from conformance.validator.run import ValidationLevel
from core.callers import Caller
from core.errors import (
    BackendUnavailableError,
    EnvhubError,
    InvalidInputError,
    LaunchError,
    NotFoundError,
    UnauthorizedError,
    UpstreamError,
)
from core.leases import Leases
from hosting.endpoints import EndpointManager
from hosting.models import Backend, EndpointStatus
from hosting.options import LaunchRequest, ProcessOptions
from hosting.runtimes.process import ProcessRuntime

__all__ = ["Run", "Stage", "SubmissionQueue", "stages"]

log = logging.getLogger("envhub")

ENVHUB = Caller(admin=True)  # a submission's endpoint is envhub's own, not its submitter's
_POLL_S = 0.25  # how often the launch stage reads its endpoint's row
_IDLE_S = 5.0  # how often an idle worker looks for submissions another instance queued
_WORSE = {Verdict.PASS: 0, Verdict.WARN: 1, Verdict.FAIL: 2}


@dataclass
class Run:
    """One submission under way: what it checks, what its stages use, and what they found."""

    submission: Submission
    settings: Settings
    manager: EndpointManager
    checker: Checker
    validations: Validations
    statistics: Statistics
    verdicts: list[Verdict] = field(default_factory=list)
    reports: dict[str, list[int]] = field(default_factory=dict)
    measured: dict[str, float] = field(default_factory=dict)  # training_signal, headroom, gameability_gap
    endpoint: str | None = None  # the endpoint the launch stage started
    url: str | None = None  # its first ready server
    folder: str | None = None  # the Space's files, downloaded

    @property
    def space(self) -> str:
        return self.submission.space

    @property
    def revision(self) -> str:
        return self.submission.revision


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[Run], Awaitable[None]]
    timeout_s: float
    setting: str  # the setting its timeout comes from, named when it runs out


async def download(run: Run) -> None:
    """The Space's files at the revision, refused from their listing when they pass the size allowed."""
    process = run.manager.runtime(Backend.PROCESS)
    if not isinstance(process, ProcessRuntime):
        raise BackendUnavailableError("this server has no process backend: the board runs submissions on it")
    folder = await asyncio.to_thread(
        process.snapshots.fetch,
        run.space,
        run.revision,
        None,
        lambda said: log.info("submission %s: %s", run.submission.id, said),
        max_bytes=run.settings.board_max_space_bytes,
    )
    run.folder = str(folder)


async def validator(run: Run) -> None:
    """openenv's validator on the downloaded files, every level: without a Docker engine to build and run the
    image, the deeper levels' checks are the validator's named skips."""
    filed = await run.validations.validate(f"{run.space}@{run.revision}", level=ValidationLevel.SEMANTIC)
    run.reports["validator"] = [filed.id]
    run.verdicts.append(Verdict(filed.verdict or "fail"))


async def launch(run: Run) -> None:
    """An endpoint of the Space at the revision, envhub's own and sandboxed, until it is ready."""
    request = LaunchRequest(environment=f"{run.space}@{run.revision}", options=ProcessOptions(sandbox=True))
    endpoint = await asyncio.to_thread(run.manager.launch, request, ENVHUB)
    run.endpoint = endpoint.id
    await asyncio.to_thread(note, run.checker.engine, run.submission.id or 0, endpoint=endpoint.id)
    while endpoint.status not in (EndpointStatus.RUNNING, EndpointStatus.FAILED, EndpointStatus.STOPPED):
        await asyncio.sleep(_POLL_S)
        endpoint = await asyncio.to_thread(run.manager.get, endpoint.id)
    if endpoint.status != EndpointStatus.RUNNING:
        raise LaunchError(f"{run.space}@{run.revision[:12]} did not start: {endpoint.message}")


async def _hosted(run: Run) -> dict[str, Any]:
    """What hosting knows of the submission's running endpoint; LaunchError when no server of it is ready."""
    assert run.endpoint is not None
    endpoint = await asyncio.to_thread(run.manager.get, run.endpoint)
    known = await asyncio.to_thread(hosted, run.manager, endpoint)
    if not known["replicas"]:
        raise LaunchError(f"endpoint {endpoint.id} of {run.space} has no server ready any more: it stopped")
    return known


async def hub_lane(run: Run) -> None:
    """The conformance checklist and a quality report of the running endpoint, filed under the Space."""
    known = await _hosted(run)
    endpoint_id = run.endpoint
    first = known["replicas"][0]
    url, trusted = first.url, tuple(r.url for r in known["replicas"])
    protocol = await run.checker.check(
        url, environment=run.space, endpoint=endpoint_id, trusted=trusted, server_capacity=known["server_capacity"]
    )
    quality = await run.checker.check_quality(
        url,
        environment=run.space,
        endpoint=endpoint_id,
        revision=run.revision,
        trusted=trusted,
        replica=first.id,
        **known,
    )
    run.reports["hub_lane"] = [protocol.id, quality.id]
    run.verdicts += [Verdict(protocol.verdict or "fail"), Verdict(quality.verdict or "fail")]


# What the board ranks by, from the statistical report: (the check, the figure it measured).
BOARD_FIGURES = {
    "training_signal": ("statistical.training_signal", "share_of_groups"),
    "headroom": ("statistical.headroom", "headroom"),
    "gameability_gap": ("statistical.gameability_gap", "gap"),
}


def board_figures(report: Report) -> dict[str, float]:
    """The figures the board ranks by; one its check did not measure (no reference model, no declared range) is
    left out."""
    measured = {r.check_id: r.measured for r in report.results}
    found = {name: measured.get(check_id, {}).get(key) for name, (check_id, key) in BOARD_FIGURES.items()}
    return {name: float(v) for name, v in found.items() if isinstance(v, int | float) and not isinstance(v, bool)}


async def statistical(run: Run) -> None:
    """The statistical lane on the running endpoint, with the admin's reference players (the baselines, the
    adversarial panel, ENVHUB_STATISTICAL_REFERENCE_PRESET when set): its verdict, and the figures the board ranks
    by. The report stops with the stage when the stage runs out of time."""
    url = (await _hosted(run))["replicas"][0].url
    assert run.endpoint is not None
    body = StatisticsRequest(endpoint=run.endpoint)
    filed = await run.statistics.start(body, ENVHUB, lambda _: url)
    run.reports["statistical"] = [filed.id]
    await run.statistics.ended(filed.id, owned=True)
    report = (await asyncio.to_thread(run.statistics.filed, filed.id)).report
    if report.status != RunStatus.FINISHED or report.verdict is None:
        raise UpstreamError(
            f"statistical report {filed.id} failed ({report.code}): {report.message}", code="statistical_failed"
        )
    run.verdicts.append(report.verdict)
    run.measured |= board_figures(report)


def stages(settings: Settings) -> list[Stage]:
    """The stages every submission goes through, in order."""
    return [
        Stage("download", download, settings.board_download_timeout_s, "ENVHUB_BOARD_DOWNLOAD_TIMEOUT_S"),
        Stage("validator", validator, settings.validator_timeout_s, "ENVHUB_VALIDATOR_TIMEOUT_S"),
        Stage("launch", launch, settings.board_launch_timeout_s, "ENVHUB_BOARD_LAUNCH_TIMEOUT_S"),
        Stage("hub_lane", hub_lane, settings.board_checks_timeout_s, "ENVHUB_BOARD_CHECKS_TIMEOUT_S"),
        Stage("statistical", statistical, settings.board_statistical_timeout_s, "ENVHUB_BOARD_STATISTICAL_TIMEOUT_S"),
    ]


class SubmissionQueue:
    """Runs queued submissions, `settings.board_concurrency` at a time, in this envhub process."""

    def __init__(
        self,
        settings: Settings,
        manager: EndpointManager,
        checker: Checker,
        validations: Validations,
        leases: Leases,
        statistics: Statistics,
    ) -> None:
        self.settings = settings
        self.manager = manager
        self.checker = checker
        self.validations = validations
        self.statistics = statistics
        self.leases = leases
        self.engine = checker.engine
        self._wake = asyncio.Event()
        self._workers: list[asyncio.Task[None]] = []

    async def submit(self, space: str, revision: str | None, caller: Caller) -> tuple[Submission, bool]:
        """The submission of a catalog Space at a revision (a sha or 7+ characters of one; None: the catalog's),
        queued now (True) unless that revision was submitted before. With sign-in on, only signed-in callers
        submit."""
        if self.manager.access.sign_in and caller.user is None and not caller.admin:
            raise UnauthorizedError(
                "sign in with Hugging Face (/auth/login) to submit, or send 'Authorization: Bearer <your Hub token>'",
                code="sign_in_required",
            )
        environment = await read_environment(self.engine, f"{space}@{revision}" if revision else space)
        if environment is None:
            raise NotFoundError(f"no Space {space!r} in the catalog: tag it openenv, sync, and submit it again")
        if environment.source != Source.HUB or environment.sha is None:
            raise InvalidInputError(f"{space} is not a Hub Space: the board takes Spaces, pinned at a commit")
        submission, created = await asyncio.to_thread(
            submit, self.engine, environment.id, environment.sha, caller.name, self.settings.board_per_user
        )
        if created:
            self._wake.set()
        return submission, created

    async def start(self) -> None:
        for left in await asyncio.to_thread(requeue, self.engine, await asyncio.to_thread(self.leases.live_instances)):
            if left.endpoint is not None:  # its endpoint from before: the submission starts a new one
                with suppress(EnvhubError):
                    await asyncio.to_thread(self.manager.end, left.endpoint, "its board submission starts again")
        self._workers = [asyncio.create_task(self._work()) for _ in range(self.settings.board_concurrency)]

    async def stop(self) -> None:
        """Stop the workers; what they ran stays `running`, for the next start to queue again."""
        for worker in self._workers:
            worker.cancel()
        for worker in self._workers:
            with suppress(asyncio.CancelledError):
                await worker

    async def _work(self) -> None:
        while True:
            submission = await asyncio.to_thread(claim, self.engine, self.leases.instance)
            if submission is None:
                self._wake.clear()
                with suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), _IDLE_S)
                continue
            try:
                await self._run(submission)
            except asyncio.CancelledError:
                raise
            except Exception:  # one submission's trouble never stops the queue
                log.exception("board submission %s", submission.id)
                await asyncio.to_thread(
                    finish,
                    self.engine,
                    submission.id or 0,
                    status=SubmissionStatus.FAILED,
                    code="internal_error",
                    message="envhub failed while checking it; submit a new revision, or tell the admin",
                )

    async def _run(self, submission: Submission) -> None:
        run = Run(submission, self.settings, self.manager, self.checker, self.validations, self.statistics)
        try:
            ending = await self._stages(run)
        finally:
            if run.endpoint is not None:
                with suppress(EnvhubError):
                    await asyncio.to_thread(self.manager.end, run.endpoint, "its board submission was checked")
        await asyncio.to_thread(finish, self.engine, submission.id or 0, reports=run.reports, **run.measured, **ending)

    async def _stages(self, run: Run) -> dict[str, Any]:
        """How the submission ends: done with the worst verdict, or failed at the first stage that could not run."""
        for stage in stages(self.settings):
            await asyncio.to_thread(note, self.engine, run.submission.id or 0, stage=stage.name, message=stage.name)
            try:
                await asyncio.wait_for(stage.run(run), stage.timeout_s)
            except TimeoutError:
                message = (
                    f"the {stage.name} stage took longer than {stage.timeout_s:g} s ({stage.setting}): "
                    "make the Space start and answer faster, then submit the new revision"
                )
                return _failed(stage.name, "stage_timeout", message)
            except EnvhubError as exc:
                return _failed(stage.name, exc.code, f"the {stage.name} stage failed: {exc.message}")
        verdict = max(run.verdicts, key=_WORSE.__getitem__) if run.verdicts else None
        said = verdict.value if verdict else "no verdict"
        return {"status": SubmissionStatus.DONE, "stage": None, "verdict": verdict, "message": f"done: {said}"}


def _failed(stage: str, code: str, message: str) -> dict[str, Any]:
    return {"status": SubmissionStatus.FAILED, "stage": stage, "code": code, "message": message}

"""The one check engine: a check, its outcome and result, the runner of a list of checks, and the verdict policy.

Every lane registers its checks here, in a `Registry` of its own, and runs them with `run_checks`:
- the protocol checklist (conformance.discovery, .mcp, .tasks, .sessions; ids are checklist numbers);
- the hub lane (conformance.quality: what openenv's validator leaves to a hub, under RFC 008's ids);
- the statistical lane (conformance.statistical: the reserved `statistical.*` ids).

Registering a lane's checks:

    checks: Registry[MyContext] = Registry(Level.STATISTICAL)

    @checks("statistical.headroom", "The best honest player stays below the maximum", Severity.WARN)
    async def headroom(ctx: MyContext) -> Finding:
        return Finding.passed("the best player earns 0.6 of 1", best=0.6)

A check returns a `Finding` (or, briefly, the line of evidence of a pass, or None) and raises `Fail`, `Skip` or
`NotRun` to say it did not pass. The lane's context is a `Subject` (inherit `Lane` for the defaults): it says how
long is left, may stand in for a check it knows cannot run, explains the exceptions of its own, and adds what it
saw to each finding. `run_checks(context, checks)` gives the results (`CheckResult`, the validator's fields); the
lane wraps them in a `conformance.report.Report` of its `Suite` and files it with `Checker.file(report, ...)`,
which stores it in the `checkreport` table. `verdict_of` is the one verdict policy.
"""

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from catalog.models import Verdict

__all__ = [
    "NEWER",
    "Check",
    "CheckResult",
    "Fail",
    "Finding",
    "Lane",
    "Level",
    "NotRun",
    "Outcome",
    "Registry",
    "Severity",
    "Skip",
    "Subject",
    "Verdict",
    "run_checks",
    "verdict_of",
]

log = logging.getLogger(__name__)

NEWER = "0.10"  # the protocol version that brought the Task API, reset_observation and MCP sessions


class Outcome(StrEnum):
    PASS = "pass"  # noqa: S105  (a result, not a password)
    FAIL = "fail"
    SKIP = "skip"  # the checklist: it does not apply; other lanes: it could not be measured, and says why
    ERROR = "error"  # could not be run: what it needs failed earlier, or the deadline passed


class Severity(StrEnum):
    """What a check's failure does to the verdict: `fail` fails it, `warn` only warns."""

    FAIL = "fail"
    WARN = "warn"


class Level(StrEnum):
    """Where a result belongs: the checklist's core checks, its 0.10 checks or its warnings, or another lane."""

    CORE = "core"
    V010 = NEWER
    WARN = "warn"
    RUNTIME = "runtime"  # an RFC 008 runtime check the validator of this openenv does not grade
    HUB = "hub"
    STATISTICAL = "statistical"


class Fail(Exception):
    """The server broke what the check asserts."""


class Skip(Exception):
    """The check does not apply to this server, or cannot be measured on it."""


class NotRun(Exception):
    """The check could not be run: something it needs failed earlier."""


@dataclass(frozen=True)
class Finding:
    """What a check found: the fields of its result besides its id, title, level and duration."""

    status: Outcome
    evidence: list[str]
    measured: dict[str, Any] = field(default_factory=dict)
    remediation: str | None = None

    @classmethod
    def passed(cls, *evidence: str, **measured: Any) -> "Finding":
        return cls(Outcome.PASS, list(evidence), measured)

    @classmethod
    def failed(cls, evidence: list[str], remediation: str, **measured: Any) -> "Finding":
        return cls(Outcome.FAIL, evidence, measured, remediation)

    @classmethod
    def skipped(cls, reason: str, remediation: str | None = None, **measured: Any) -> "Finding":
        return cls(Outcome.SKIP, [reason], measured, remediation)

    @classmethod
    def error(cls, reason: str, remediation: str | None = None) -> "Finding":
        return cls(Outcome.ERROR, [reason], remediation=remediation)


C = TypeVar("C")
CheckFn = Callable[[C], Awaitable[Finding | str | None]]


@dataclass(frozen=True)
class Check(Generic[C]):
    check_id: str
    title: str
    run: CheckFn[C]
    severity: Severity = Severity.FAIL
    level: Level = Level.CORE
    since: str | None = None  # the protocol version that brought what it checks; older servers skip it
    timeout_s: float | None = None  # its own bound, within what is left of the run's deadline
    applies: Callable[[C], bool] | None = None  # None: always; a check that does not apply is not listed


class Registry(list[Check[C]]):
    """The checks of one module, in the order they run, registered with the decorator it is."""

    def __init__(self, level: Level = Level.CORE) -> None:
        super().__init__()
        self.level = level

    def __call__(
        self,
        check_id: str,
        title: str,
        severity: Severity = Severity.FAIL,
        *,
        since: str | None = None,
        timeout_s: float | None = None,
        applies: Callable[[C], bool] | None = None,
    ) -> Callable[[CheckFn[C]], CheckFn[C]]:
        level = self.level
        if level == Level.CORE:  # the checklist's level says what decides conformance
            level = Level.WARN if severity == Severity.WARN else (Level.V010 if since == NEWER else Level.CORE)

        def register(fn: CheckFn[C]) -> CheckFn[C]:
            self.append(Check(check_id, title, fn, severity, level, since, timeout_s, applies))
            return fn

        return register


class CheckResult(BaseModel):
    """One check's result, with the fields of openenv's validator (`check_id` ... `duration_s`) and the title,
    level and severity of the check."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    check_id: str
    title: str = ""
    level: Level = Level.RUNTIME
    severity: Severity = Severity.FAIL
    status: Outcome
    measured: dict[str, Any] = Field(default_factory=dict)
    evidence: list[str] = Field(default_factory=list, description="short, readable lines")
    remediation: str | None = Field(default=None, description="what the environment's author changes to go green")
    duration_s: float = Field(default=0, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _stored_checklist_item(cls, data: Any) -> Any:
        """A checklist item as reports stored it before the engine was one: id, result, message, the exchanges as
        evidence, duration_ms."""
        if not isinstance(data, dict) or "result" not in data:
            return data
        exchanges = data.get("evidence") or []
        return {
            "check_id": data["id"],
            "title": data.get("title", ""),
            "level": data.get("level", Level.CORE),
            "severity": Severity.WARN if data.get("level") == Level.WARN else Severity.FAIL,
            "status": data["result"],
            "measured": {"exchanges": exchanges} if exchanges else {},
            "evidence": [data["message"]] if data.get("message") else [],
            "duration_s": round(float(data.get("duration_ms") or 0) / 1000, 5),
        }

    @property
    def message(self) -> str:
        """The first line of evidence: the checklist's one-line reason."""
        return self.evidence[0] if self.evidence else ""

    @property
    def counts(self) -> bool:
        """Whether this result decides protocol conformance: a core or 0.10 check that applied."""
        return self.level in (Level.CORE, Level.V010) and self.status != Outcome.SKIP


def verdict_of(results: Iterable[CheckResult], *, skip_warns: bool = True) -> Verdict:
    """The validator's policy: a `fail` or `error` of a fail-severity check fails; of a warn-severity check, warns;
    a skip warns where it means "not measured" (`skip_warns`), not where it means "does not apply"."""
    verdict = Verdict.PASS
    for result in results:
        if result.status in (Outcome.FAIL, Outcome.ERROR):
            if result.severity == Severity.FAIL:
                return Verdict.FAIL
            verdict = Verdict.WARN
        elif result.status == Outcome.SKIP and skip_warns:
            verdict = Verdict.WARN
    return verdict


class Subject(Protocol):
    """What a lane's context gives the runner."""

    def remaining(self) -> float:
        """Seconds left of the run's deadline."""
        ...

    def before(self, check: Check[Any]) -> Finding | None:
        """None to run the check, else the finding that stands in for it (the server is gone, say)."""
        ...

    async def caught(self, check: Check[Any], exc: Exception) -> Finding | None:
        """What an exception of the lane's own means; None: the runner's default. It may raise to stop the run."""
        ...

    def after(self, check: Check[Any], finding: Finding) -> Finding:
        """The finding with what the lane saw while the check ran (the exchanges, say)."""
        ...


class Lane:
    """A Subject's defaults, for a lane's context to inherit: run every check, explain nothing, add nothing."""

    deadline: float = math.inf  # time.monotonic() at the run's deadline

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def before(self, check: Check[Any]) -> Finding | None:
        return None

    async def caught(self, check: Check[Any], exc: Exception) -> Finding | None:
        return None

    def after(self, check: Check[Any], finding: Finding) -> Finding:
        return finding


S = TypeVar("S", bound=Subject)


async def _finding(subject: S, check: Check[S]) -> Finding:
    if subject.remaining() <= 0:
        return Finding.error("not run: the deadline passed before this check")
    stands_in = subject.before(check)
    if stands_in is not None:
        return stands_in
    bound = min(subject.remaining(), check.timeout_s or math.inf)
    try:
        async with asyncio.timeout(bound):
            got = await check.run(subject)
        return got if isinstance(got, Finding) else Finding.passed(*([got] if got else []))
    except Fail as exc:
        return Finding(Outcome.FAIL, [str(exc)])
    except Skip as exc:
        return Finding(Outcome.SKIP, [str(exc)])
    except NotRun as exc:
        return Finding.error(str(exc))
    except Exception as exc:
        explained = await subject.caught(check, exc)
        if explained is not None:
            return explained
        if isinstance(exc, TimeoutError):
            own = check.timeout_s is not None and bound == check.timeout_s
            return Finding.error(
                f"not finished within its own {bound:g} s" if own else "not finished: the deadline passed during it"
            )
        log.warning("check %s raised", check.check_id, exc_info=True)
        return Finding.error(f"the checker failed: {type(exc).__name__}: {exc}")


async def run_checks(subject: S, checks: Iterable[Check[S]]) -> list[CheckResult]:
    """Run the checks that apply, in order, each bounded by its own timeout and what is left of the deadline; an
    exception becomes an `error` result saying what failed."""
    results = []
    for check in checks:
        if check.applies is not None and not check.applies(subject):
            continue
        started = time.perf_counter()
        finding = subject.after(check, await _finding(subject, check))
        results.append(
            CheckResult(
                check_id=check.check_id,
                title=check.title,
                level=check.level,
                severity=check.severity,
                status=finding.status,
                measured=finding.measured,
                evidence=finding.evidence,
                remediation=finding.remediation,
                duration_s=round(time.perf_counter() - started, 4),
            )
        )
    return results

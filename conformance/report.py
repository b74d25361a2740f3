"""What a conformance check finds: one result per checklist item, and the report around them."""

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, computed_field

from catalog.models import ConformanceSummary


class Severity(StrEnum):
    """How much a check matters: `core` checks decide conformance, `warn` checks (quality) are reported only."""

    CORE = "core"
    WARN = "warn"


NEWER = "0.10"  # the protocol version that brought the Task API, reset_observation and MCP sessions


class Level(StrEnum):
    """A result's level as reports show it: a core check of every server, of servers since 0.10, or a warning."""

    CORE = "core"
    V010 = NEWER
    WARN = "warn"

    @classmethod
    def of(cls, severity: Severity, since: str | None) -> "Level":
        if severity == Severity.WARN:
            return cls.WARN
        return cls.V010 if since == NEWER else cls.CORE


class Outcome(StrEnum):
    PASS = "pass"  # noqa: S105  (a result, not a password)
    FAIL = "fail"
    SKIP = "skip"  # does not apply to this server (an older version, production mode, no web UI)
    ERROR = "error"  # could not be run: what it needs failed earlier, or the deadline passed


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Evidence(_Frozen):
    """One exchange: what the checker sent and an excerpt of what came back."""

    sent: str
    received: str


class CheckResult(_Frozen):
    id: str = Field(description="the item's number in the conformance checklist")
    title: str
    level: Level
    result: Outcome
    message: str = ""
    evidence: tuple[Evidence, ...] = ()
    duration_ms: float = 0

    @property
    def counts(self) -> bool:
        """Whether this result decides conformance: core and 0.10 checks that applied."""
        return self.level != Level.WARN and self.result != Outcome.SKIP


class ServerProfile(_Frozen):
    """What the checker learned about the server while checking it."""

    mode: str | None = Field(default=None, description="simulation or production, from /openapi.json")
    generation: str | None = Field(default=None, description="'0.10' when it has the newer features, else 'older'")
    env_name: str | None = Field(default=None, description="the Task API name")
    max_sessions: int | None = Field(default=None, description="the session limit, when the server revealed it")
    mcp_tools: int | None = Field(default=None, description="tools listed by tools/list; None without MCP")
    web_ui: bool = False


class ConformanceReport(_Frozen):
    """A full check of one base URL."""

    # A stored report carries its computed fields too; reading it back ignores them.
    model_config = ConfigDict(frozen=True, extra="ignore")

    url: str
    checked_at: datetime
    seconds: float
    profile: ServerProfile
    checks: tuple[CheckResult, ...]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def conforms(self) -> bool:
        """Every core check passed, and every 0.10 check the server's features call for."""
        return all(c.result == Outcome.PASS for c in self.checks if c.counts)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def core_passed(self) -> int:
        return sum(c.result == Outcome.PASS for c in self.checks if c.counts)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def core_total(self) -> int:
        return sum(c.counts for c in self.checks)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def failing(self) -> list[str]:
        """Ids of core and 0.10 checks that failed or could not run."""
        return [c.id for c in self.checks if c.counts and c.result != Outcome.PASS]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def warnings(self) -> list[str]:
        return [c.id for c in self.checks if c.level == Level.WARN and c.result in (Outcome.FAIL, Outcome.ERROR)]

    def result(self, check_id: str) -> CheckResult:
        return next(c for c in self.checks if c.id == check_id)

    def summary(self, report_id: int | None = None) -> ConformanceSummary:
        return ConformanceSummary(
            conforms=self.conforms,
            core_passed=self.core_passed,
            core_total=self.core_total,
            warnings=len(self.warnings),
            checked_at=self.checked_at,
            report_id=report_id,
        )

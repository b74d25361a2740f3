"""The health an entry carries: the status the monitor last saw, recent latencies and their medians.

What a Hub stage means is here too: a Space the Hub reports asleep, building or broken
is recorded as such without a request to it.
"""

import statistics

from catalog.models import HealthRecord
from core.clock import utcnow
from envclient.health import HealthStatus, Probe

__all__ = ["HUB_STAGE", "RUNNING_STAGES", "SAMPLES", "record", "stage_health"]

SAMPLES = 10  # latencies kept per kind; the median of these is shown

RUNNING_STAGES = frozenset({"RUNNING", "RUNNING_BUILDING", "RUNNING_APP_STARTING"})
BUILDING_STAGES = frozenset({"BUILDING", "APP_STARTING"})
SLEEPING_STAGES = frozenset({"SLEEPING", "PAUSED", "STOPPED"})
ERROR_STAGES = frozenset({"BUILD_ERROR", "RUNTIME_ERROR", "CONFIG_ERROR", "NO_APP_FILE"})
HUB_STAGE = "hub_stage"  # the reason of a status the Hub's stage of the Space (its runtime_stage) says


def record(previous: HealthRecord | None, seen: Probe, *, cold_start_s: float | None = None) -> HealthRecord:
    """The health kept on a row after a probe: the new status, recent latencies and their medians."""
    now = utcnow()
    samples = dict(previous.samples) if previous is not None else {}
    for kind, value in (("health", seen.health_ms), ("reset", seen.reset_ms)):
        kept = list(samples.get(kind, []))
        samples[kind] = [*kept, value][-SAMPLES:] if value is not None else kept
    changed = previous is None or previous.status != seen.status
    return HealthRecord(
        status=seen.status,
        message=seen.message,
        reason=seen.reason,
        checked_at=now,
        since=now if changed or previous is None or previous.since is None else previous.since,
        health_ms=round(statistics.median(samples["health"]), 2) if samples["health"] else None,
        reset_ms=round(statistics.median(samples["reset"]), 2) if samples["reset"] else None,
        cold_start_s=cold_start_s if cold_start_s is not None else (previous.cold_start_s if previous else None),
        samples=samples,
        waking_since=previous.waking_since if previous is not None else None,
    )


def stage_health(stage: str | None, error_message: str | None) -> Probe | None:
    """The status a Hub stage means without asking the Space; None when the Space runs and may be probed."""
    if stage in RUNNING_STAGES:
        return None
    if stage in SLEEPING_STAGES:
        return Probe(HealthStatus.SLEEPING, f"the Hub reports {stage}; it wakes when someone asks", HUB_STAGE)
    if stage in BUILDING_STAGES:
        return Probe(HealthStatus.BUILDING, f"the Hub reports {stage}", HUB_STAGE)
    if stage in ERROR_STAGES:
        said = f"the Hub reports {stage}" + (f": {error_message}" if error_message else "")
        return Probe(HealthStatus.ERROR, said, HUB_STAGE)
    return Probe(HealthStatus.DOWN, f"the Hub reports {stage or 'no stage'}", HUB_STAGE)

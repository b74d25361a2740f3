"""The environment page never sends a request to a Space that sleeps."""

from app.ui.detail import asleep
from catalog.models import EnvironmentDetail, Health, Source
from protocol.health import HealthStatus


def environment(**fields: object) -> EnvironmentDetail:
    return EnvironmentDetail.model_validate({"id": "alice/chess", "source": Source.HUB, "title": "Chess", **fields})


def test_a_space_the_hub_or_the_monitor_reports_asleep_is_left_alone() -> None:
    assert asleep(environment(runtime_stage="SLEEPING"))
    assert asleep(environment(runtime_stage="PAUSED"))
    assert asleep(environment(runtime_stage="RUNNING", health=Health(status=HealthStatus.SLEEPING)))
    assert not asleep(environment(runtime_stage="RUNNING", health=Health(status=HealthStatus.UP)))
    assert not asleep(environment())

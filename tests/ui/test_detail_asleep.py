"""The environment page never sends a request to a Space that sleeps, and shows one being woken as such."""

from datetime import timedelta

from app.ui.describe import status_html
from app.ui.detail import asleep
from catalog.models import EnvironmentDetail, Health, Source
from catalog.space_health import WAKING
from core.clock import utcnow
from envclient.health import HealthStatus


def environment(**fields: object) -> EnvironmentDetail:
    return EnvironmentDetail.model_validate({"id": "alice/chess", "source": Source.HUB, "title": "Chess", **fields})


def test_a_space_the_hub_or_the_monitor_reports_asleep_is_left_alone() -> None:
    assert asleep(environment(runtime_stage="SLEEPING"))
    assert asleep(environment(runtime_stage="PAUSED"))
    assert asleep(environment(runtime_stage="RUNNING", health=Health(status=HealthStatus.SLEEPING)))
    assert not asleep(environment(runtime_stage="RUNNING", health=Health(status=HealthStatus.UP)))
    assert not asleep(environment())


def test_a_space_being_woken_shows_it_and_offers_no_second_wake() -> None:
    health = Health(status=HealthStatus.BUILDING, message=WAKING, waking_since=utcnow())
    waking = environment(runtime_stage="SLEEPING", health=health)

    assert not asleep(waking)
    assert "Waking the Space" in status_html(waking, None)
    assert "Waking the Space" not in status_html(environment(runtime_stage="SLEEPING"), None)


def test_a_wake_whose_follower_went_offers_the_wake_again() -> None:
    """A wake's follower lives in its envhub: after a restart mid-wake, a probe that finds the Space asleep, or the
    wake's time running out, puts the Wake button back."""
    asked = utcnow()
    seen_asleep = Health(status=HealthStatus.SLEEPING, waking_since=asked)
    long_ago = Health(status=HealthStatus.BUILDING, message=WAKING, waking_since=asked - timedelta(hours=1))

    assert asleep(environment(runtime_stage="SLEEPING", health=seen_asleep))
    assert asleep(environment(runtime_stage="SLEEPING", health=long_ago))
    assert "Waking the Space" not in status_html(environment(runtime_stage="SLEEPING", health=long_ago), None)

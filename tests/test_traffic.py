"""Gateway counters: sessions, steps and their latency, errors; and the last activity shared through the row."""

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine
from sqlmodel import Session

from gateway.traffic import Traffic
from hosting.models import Backend, Endpoint
from hosting.traffic import TrafficBook


def test_counters_and_step_latency_percentiles(engine: Engine) -> None:
    book = TrafficBook(engine)
    endpoint = Endpoint(id="ep", environment="template:count", backend=Backend.PROCESS)
    assert book.stats(endpoint).last_active_at is None  # nothing yet
    traffic: Traffic = book.of("ep")
    traffic.session_opened()
    traffic.session_opened()
    traffic.session_closed()
    for ms in range(1, 101):
        traffic.step(ms / 1000, failed=ms == 100)
    traffic.request(failed=True)
    stats = book.stats(endpoint)
    assert (stats.active_sessions, stats.sessions, stats.steps, stats.requests, stats.errors) == (1, 2, 100, 1, 2)
    assert (stats.step_p50_ms, stats.step_p95_ms) == (50.5, 95.05)
    assert stats.last_active_at is not None


def test_activity_is_written_to_the_row_once_and_only_forward(engine: Engine) -> None:
    with Session(engine) as session:
        session.add(Endpoint(id="ep", environment="template:count", backend=Backend.PROCESS))
        session.commit()
    book = TrafficBook(engine)
    book.write_activity(["ep"])  # no traffic through this instance: nothing to write

    def row() -> Endpoint:
        with Session(engine) as session:
            found = session.get(Endpoint, "ep")
            assert found is not None
            return found

    assert row().last_active_at is None
    book.of("ep").request()
    book.write_activity(["ep"])
    written = row().last_active_at
    assert written is not None
    later = datetime.now(UTC) + timedelta(hours=1)  # another instance's gateway saw later traffic
    with Session(engine) as session:
        endpoint = session.get(Endpoint, "ep")
        assert endpoint is not None
        endpoint.last_active_at = later
        session.commit()
    book.of("ep").request()
    book.write_activity(["ep"])
    seen = row()
    assert seen.last_active_at is not None and seen.last_active_at.replace(tzinfo=UTC) == later  # never back
    assert book.stats(seen).last_active_at == later  # this instance's counters, the row's last activity

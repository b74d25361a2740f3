"""Hosted endpoints as rows: the truth users see of each (its status, message, pool options, owner), read and
written here; launching and stopping them is the manager's (hosting/endpoints.py)."""

from typing import Any

from sqlalchemy import ColumnElement, Engine, select, update
from sqlmodel import Session, col

from catalog.models import ConformanceSummary, Environment
from core.errors import NotFoundError
from hosting.models import ACTIVE, Endpoint, EndpointStatus

__all__ = ["EndpointStore"]


class EndpointStore:
    """Every endpoint's row, whichever envhub instance manages it."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def find(self, endpoint_id: str) -> Endpoint | None:
        with Session(self.engine) as session:
            return session.get(Endpoint, endpoint_id)

    def get(self, endpoint_id: str) -> Endpoint:
        endpoint = self.find(endpoint_id)
        if endpoint is None:
            raise NotFoundError(f"no endpoint {endpoint_id!r}; list them with GET /api/endpoints")
        return endpoint

    def list(self, *, owner: str | None = None, active_only: bool = False) -> list[Endpoint]:
        statement = select(Endpoint).order_by(col(Endpoint.created_at).desc())
        if owner is not None:
            statement = statement.where(col(Endpoint.owner) == owner)
        if active_only:
            statement = statement.where(col(Endpoint.status).in_(ACTIVE))
        with Session(self.engine) as session:
            return list(session.execute(statement).scalars())

    def running_endpoint(self, environment_id: str) -> Endpoint | None:
        """The newest running endpoint of an environment."""
        running = (e for e in self.list(active_only=True) if e.status == EndpointStatus.RUNNING)
        return next((e for e in running if e.environment == environment_id), None)

    def active_by_environment(self) -> dict[str, str]:
        """environment id -> status of its newest active endpoint."""
        found: dict[str, str] = {}
        for endpoint in self.list(active_only=True):
            found.setdefault(endpoint.environment, endpoint.status.value)
        return found

    def newer_revision(self, endpoint: Endpoint) -> str | None:
        """The catalog's current revision of the endpoint's environment, when it is not the one it serves."""
        with Session(self.engine) as session:
            environment = session.get(Environment, endpoint.environment)
        current = environment.sha if environment is not None else None
        return current if endpoint.revision and current and current != endpoint.revision else None

    def update(self, endpoint_id: str, **values: Any) -> Endpoint | None:
        """Write values to an endpoint's row; the row as it is then, or None when there is none."""
        with Session(self.engine) as session:
            endpoint = session.get(Endpoint, endpoint_id)
            if endpoint is None:
                return None
            endpoint.sqlmodel_update(values)
            session.add(endpoint)
            session.commit()
            session.refresh(endpoint)
            return endpoint

    def take_over(self, endpoint: Endpoint, instance: str) -> bool:
        """Move an endpoint from the instance its row names to this one; False when another instance took it first."""
        with Session(self.engine) as session, session.begin():
            claimed = session.execute(
                update(Endpoint)
                .where(col(Endpoint.id) == endpoint.id, _same_instance(endpoint.instance))
                .values(instance=instance)
                .returning(col(Endpoint.id))
            ).first()
        return claimed is not None

    def note_conformance(self, endpoint_id: str, summary: ConformanceSummary) -> None:
        """The summary of the endpoint's last conformance check, on its row."""
        self.update(endpoint_id, conformance=summary.model_dump(mode="json"))


def _same_instance(instance: str | None) -> ColumnElement[bool]:
    column = col(Endpoint.instance)
    return column.is_(None) if instance is None else column == instance

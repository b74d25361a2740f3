"""GET /api/health: is envhub up, how big is its catalog, how did the last sync go."""

from fastapi import APIRouter
from pydantic import BaseModel

from app.api.deps import SessionDep, SettingsDep, SyncerDep
from catalog.models import SyncRunPublic
from catalog.search import count_listed
from catalog.sync import list_sync_runs

router = APIRouter(prefix="/api/health", tags=["health"])


class Health(BaseModel):
    status: str
    environments: int
    hub_endpoint: str
    sync_running: bool
    last_sync: SyncRunPublic | None


@router.get("")
def read_health(session: SessionDep, settings: SettingsDep, syncer: SyncerDep) -> Health:
    runs = list_sync_runs(session, limit=1)
    return Health(
        status="ok",
        environments=count_listed(session),
        hub_endpoint=settings.hf_endpoint,
        sync_running=syncer.running,
        last_sync=runs[0] if runs else None,
    )

"""GET /api/health: is envhub up, how big is its catalog, how did the last sync go, which instances share it, and when
it last checked its endpoints."""

from datetime import datetime

from fastapi import APIRouter
from pydantic import BaseModel, Field

from app.api.deps import KeeperDep, SessionDep, SettingsDep, SyncerDep
from catalog.models import SyncRunPublic
from catalog.store import count_listed
from catalog.sync import SYNC_RUNNING, list_sync_runs
from core.leases import INSTANCE_PREFIX

router = APIRouter(prefix="/api/health", tags=["health"])


class Health(BaseModel):
    status: str
    environments: int
    hub_endpoint: str
    sync_running: bool = Field(description="a sync runs now, on any instance")
    last_sync: SyncRunPublic | None
    instance: str = Field(description="this envhub process: host-pid-random")
    instances: list[str] = Field(description="the envhub processes alive on this database")
    leases: dict[str, str] = Field(description="who runs what: lease name -> instance (sync, health, sync-running)")
    endpoints_checked_at: datetime | None = Field(
        description="when this instance last finished checking every endpoint against what runs; null before the first"
    )


@router.get("")
def read_health(session: SessionDep, settings: SettingsDep, syncer: SyncerDep, keeper: KeeperDep) -> Health:
    runs = list_sync_runs(session, limit=1)
    live = syncer.leases.live()
    return Health(
        status="ok",
        environments=count_listed(session),
        hub_endpoint=settings.hf_endpoint,
        sync_running=syncer.running or SYNC_RUNNING in live,
        last_sync=runs[0] if runs else None,
        instance=syncer.leases.instance,
        instances=sorted(h for n, h in live.items() if n.startswith(INSTANCE_PREFIX)),
        leases={n: h for n, h in sorted(live.items()) if not n.startswith(INSTANCE_PREFIX)},
        endpoints_checked_at=keeper.checked_at,
    )

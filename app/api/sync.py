"""POST /api/sync (admin): index the Hub now; GET /api/sync: recent sync runs."""

from fastapi import APIRouter, Response, status

from app.api.deps import AdminDep, SessionDep, SyncerDep
from catalog.models import SyncRunPublic, SyncRunsPublic
from catalog.sync import get_sync_run, list_sync_runs

router = APIRouter(prefix="/api/sync", tags=["sync"])


@router.post("", dependencies=[AdminDep], status_code=status.HTTP_202_ACCEPTED)
def start_sync(syncer: SyncerDep, response: Response, full: bool = False, wait: bool = False) -> SyncRunPublic:
    """Start a sync (202, poll GET /api/sync/{id}); with wait=true, answer when it is done (200)."""
    if wait:
        response.status_code = status.HTTP_200_OK
        return syncer.run(full=full)
    return syncer.start(full=full)


@router.get("")
def read_sync_runs(session: SessionDep) -> SyncRunsPublic:
    runs = list_sync_runs(session)
    return SyncRunsPublic(data=runs, count=len(runs))


@router.get("/{run_id}")
def read_sync_run(session: SessionDep, run_id: int) -> SyncRunPublic:
    return get_sync_run(session, run_id)

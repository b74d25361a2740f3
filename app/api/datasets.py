"""GET /api/datasets and GET /api/datasets/{id}: datasets of environments."""

from typing import Annotated

from fastapi import APIRouter, Query

from app.api.deps import SessionDep
from catalog.models import DatasetDetail, DatasetsPublic
from catalog.search import list_datasets
from catalog.store import get_dataset

router = APIRouter(prefix="/api/datasets", tags=["datasets"])


@router.get("")
def read_datasets(
    session: SessionDep,
    q: Annotated[str, Query(max_length=500)] = "",
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> DatasetsPublic:
    data, count = list_datasets(session, q=q, limit=limit, offset=offset)
    return DatasetsPublic(data=data, count=count)


@router.get("/{dataset_id:path}")
def read_dataset(session: SessionDep, dataset_id: str) -> DatasetDetail:
    return get_dataset(session, dataset_id)

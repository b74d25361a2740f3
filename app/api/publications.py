"""POST /api/environments/{id}/publish: deploy a template as a Space in your namespace; GET /api/publications."""

from typing import Annotated

from fastapi import APIRouter, Query, status
from pydantic import BaseModel, ConfigDict, Field

from app.api.deps import CallerDep, PublisherDep
from core.errors import UnauthorizedError
from hosting.models import PublicationPublic

router = APIRouter(tags=["publications"])


class PublishRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, max_length=96, description="the Space's name; the template's by default")


class PublicationsPublic(BaseModel):
    data: list[PublicationPublic]
    count: int


@router.post("/api/environments/{environment_id:path}/publish", status_code=status.HTTP_202_ACCEPTED)
async def publish_environment(
    environment_id: str, publisher: PublisherDep, caller: CallerDep, body: PublishRequest | None = None
) -> PublicationPublic:
    """Create a Space from a template in your namespace with your Hub token; follow it at /api/publications/{id}."""
    if caller.user is None or caller.token is None:
        raise UnauthorizedError(
            "deploying as a Space acts on the Hub as you: sign in with Hugging Face (/auth/login) "
            "or send 'Authorization: Bearer <your Hub token>'",
            code="sign_in_required",
        )
    name = body.name if body else None
    publication = await publisher.publish(environment_id, caller.user.name, caller.token, name)
    return PublicationPublic.model_validate(publication.model_dump())


@router.get("/api/publications")
def list_publications(
    publisher: PublisherDep,
    environment: str | None = None,
    owner: str | None = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> PublicationsPublic:
    data = [
        PublicationPublic.model_validate(p.model_dump())
        for p in publisher.list(environment=environment, owner=owner, limit=limit)
    ]
    return PublicationsPublic(data=data, count=len(data))


@router.get("/api/publications/{publication_id}")
def read_publication(publication_id: str, publisher: PublisherDep) -> PublicationPublic:
    return PublicationPublic.model_validate(publisher.get(publication_id).model_dump())

"""Model presets: a model saved under a name by its owner (server, name, sampling, prompt) with its API key sealed
at rest, so that a run names the preset instead of carrying the key. The key is opened only to build the run's
`ModelConfig`; what is shown of a preset says whether it has a key, never what the key is."""

import re

from sqlalchemy import Engine, delete, func
from sqlmodel import Session, col, select

from core.callers import Access, Caller
from core.clock import utcnow
from core.db import upsert
from core.errors import ConflictError, InvalidInputError, NotFoundError, TooManyRequestsError, UnauthorizedError
from core.sealing import Sealer
from evals.models import ModelPreset, ModelPresetPublic
from rollout.model import ModelConfig

__all__ = ["LOCAL_OWNER", "MAX_PRESETS_PER_OWNER", "ModelPresets", "preset_owner"]

LOCAL_OWNER = ":local"  # no Hub account has a colon in its name, so no user shares these
MAX_PRESETS_PER_OWNER = 100
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_KEPT_IN_CLEAR = set(ModelConfig.model_fields) - {"api_key"}


def preset_owner(caller: Caller, access: Access) -> str:
    """Whose presets a caller saves and uses: a signed-in user's are their own; the admin's (by its token, or the
    CLI) are the local ones, and so are everyone's on a server without sign-in, where nobody can be told apart."""
    if caller.user is not None:
        return caller.user.name
    if caller.admin or not access.sign_in:
        return LOCAL_OWNER
    raise UnauthorizedError(
        "model presets keep an API key for you: sign in with Hugging Face (/auth/login) "
        "or send 'Authorization: Bearer <your Hub token>'",
        code="sign_in_required",
    )


class ModelPresets:
    """Each owner's presets, their keys sealed with envhub's secret (as users' Hub tokens are)."""

    def __init__(self, engine: Engine, sealer: Sealer) -> None:
        self.engine = engine
        self.sealer = sealer

    def save(self, owner: str, name: str, config: ModelConfig) -> ModelPreset:
        """Create the preset or replace it. A config without `api_key` keeps the key saved before; `api_key`
        null or empty removes it."""
        if not _NAME.fullmatch(name):
            raise InvalidInputError(
                f"a preset's name is 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit; "
                f"not {name!r}",
                code="preset_name_invalid",
            )
        with Session(self.engine) as session:
            old = session.get(ModelPreset, (owner, name))
            if old is None:
                mine = select(func.count()).select_from(ModelPreset).where(col(ModelPreset.owner) == owner)
                if session.exec(mine).one() >= MAX_PRESETS_PER_OWNER:
                    raise TooManyRequestsError(
                        f"you have {MAX_PRESETS_PER_OWNER} model presets, the most one may keep: delete one first",
                        code="presets_limit",
                    )
            if "api_key" in config.model_fields_set:
                key = config.api_key.get_secret_value() if config.api_key is not None else ""
                sealed = self.sealer.seal(key) if key else None
            else:
                sealed = old.api_key_sealed if old is not None else None
            row = config.model_dump(include=_KEPT_IN_CLEAR) | {"owner": owner, "name": name, "updated_at": utcnow()}
            upsert(session, ModelPreset, [row | {"api_key_sealed": sealed}])
            session.commit()
        return self.get(owner, name)

    def list(self, owner: str) -> list[ModelPreset]:
        with Session(self.engine) as session:
            mine = select(ModelPreset).where(col(ModelPreset.owner) == owner).order_by(col(ModelPreset.name))
            return list(session.exec(mine))

    def get(self, owner: str, name: str) -> ModelPreset:
        with Session(self.engine) as session:
            preset = session.get(ModelPreset, (owner, name))
        if preset is None:
            raise NotFoundError(
                f"you have no model preset {name!r}: GET /api/models lists yours", code="preset_unknown"
            )
        return preset

    def delete(self, owner: str, name: str) -> None:
        self.get(owner, name)
        with Session(self.engine) as session:
            session.execute(delete(ModelPreset).where(col(ModelPreset.owner) == owner, col(ModelPreset.name) == name))
            session.commit()

    def config_of(self, preset: ModelPreset) -> ModelConfig:
        """The model a run plays with: the preset's settings and its key, opened."""
        key = None
        if preset.api_key_sealed is not None:
            key = self.sealer.open(preset.api_key_sealed)
            if key is None:
                raise ConflictError(
                    f"the API key of model preset {preset.name!r} was sealed with another secret than this envhub's "
                    "(ENVHUB_SESSION_SECRET changed, or is unset and envhub restarted): save the preset's key again "
                    f"(PUT /api/models/{preset.name} with api_key), and set ENVHUB_SESSION_SECRET to keep it",
                    code="preset_key_sealed_elsewhere",
                )
        return ModelConfig.model_validate(preset.model_dump(include=_KEPT_IN_CLEAR) | {"api_key": key})

    @staticmethod
    def public(preset: ModelPreset) -> ModelPresetPublic:
        shown = preset.model_dump(exclude={"api_key_sealed"})
        return ModelPresetPublic.model_validate(shown | {"has_api_key": preset.api_key_sealed is not None})

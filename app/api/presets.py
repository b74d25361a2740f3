"""Model presets: save a model under a name, its API key sealed, and evaluate it by name (`{"preset": NAME}`)."""

from fastapi import APIRouter, status

from app.api.deps import AccessDep, CallerDep, PresetsDep
from evals.models import ModelPresetPublic, ModelPresetsPublic
from evals.presets import preset_owner
from rollout.model import ModelConfig

router = APIRouter(prefix="/api/models", tags=["models"])


@router.get("")
def list_presets(presets: PresetsDep, access: AccessDep, caller: CallerDep) -> ModelPresetsPublic:
    """Your presets; each says whether it has an API key, never the key."""
    owner = preset_owner(caller, access)
    data = [presets.public(p) for p in presets.list(owner)]
    return ModelPresetsPublic(data=data, count=len(data))


@router.get("/{name}")
def read_preset(name: str, presets: PresetsDep, access: AccessDep, caller: CallerDep) -> ModelPresetPublic:
    owner = preset_owner(caller, access)
    return presets.public(presets.get(owner, name))


@router.put("/{name}")
def save_preset(
    name: str, body: ModelConfig, presets: PresetsDep, access: AccessDep, caller: CallerDep
) -> ModelPresetPublic:
    """Create or replace a preset. Leave out `api_key` to keep the key saved before; `"api_key": null` removes it."""
    owner = preset_owner(caller, access)
    return presets.public(presets.save(owner, name, body))


@router.delete("/{name}", status_code=status.HTTP_204_NO_CONTENT)
def delete_preset(name: str, presets: PresetsDep, access: AccessDep, caller: CallerDep) -> None:
    presets.delete(preset_owner(caller, access), name)

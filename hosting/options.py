"""What a launch asks for: one strict, frozen options model per backend, told apart by the request's backend.

The API's schema, the validation and the Launch page's help all come from these models.
Every backend takes `env` (variables for the server) and `secrets` (passed to it, never
stored or shown); variables that change how the server's interpreter or dynamic loader
start are refused, since envhub sets those itself (for the process backend as the launch
starts, with what else the caller may not set: hosting.variables).
"""

import re
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from hosting.models import Backend

__all__ = [
    "ALLOWED_PYTHON_VARIABLES",
    "BACKEND_OPTIONS",
    "MAX_REPLICAS",
    "BackendOptions",
    "DockerOptions",
    "LaunchRequest",
    "ProcessOptions",
    "ReplicaRange",
    "SpaceOptions",
    "SwarmOptions",
    "interpreter_refusal",
    "starts_the_interpreter",
]

_VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$"  # a Hub user, organisation or repository name
_LOADER_PREFIXES = ("LD_", "DYLD_", "PYTHON")
ALLOWED_PYTHON_VARIABLES = frozenset(
    {"PYTHONHASHSEED", "PYTHONUNBUFFERED", "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONWARNINGS", "PYTHONFAULTHANDLER"}
)


def starts_the_interpreter(name: str) -> bool:
    """Whether a launch variable would change how the server's interpreter or loader starts (what it runs,
    which libraries it loads): PATH, LD_* and DYLD_*, and PYTHON* but for a few that only tune Python."""
    upper = name.upper()
    return upper == "PATH" or (upper.startswith(_LOADER_PREFIXES) and upper not in ALLOWED_PYTHON_VARIABLES)


def interpreter_refusal(names: list[str]) -> str:
    """Why variables that start the interpreter (starts_the_interpreter) are refused."""
    return (
        f"{', '.join(names)} would change how the server's interpreter or loader starts, which envhub sets itself; "
        f"of the PYTHON* variables only {', '.join(sorted(ALLOWED_PYTHON_VARIABLES))} may be set"
    )


MAX_REPLICAS = 64  # of one endpoint's pool


class ReplicaRange(BaseModel):
    """How many servers an endpoint's pool keeps: at least min, grown up to max under load."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min: Annotated[int, Field(ge=1, le=MAX_REPLICAS)] = 1
    max: Annotated[int, Field(ge=1, le=MAX_REPLICAS)] = 1

    @model_validator(mode="before")
    @classmethod
    def _count(cls, data: Any) -> Any:
        """A bare count N is a fixed pool of N."""
        if isinstance(data, bool):
            raise PydanticCustomError("replicas_not_count", "option replicas must be a count or {'min': A, 'max': B}")
        if isinstance(data, int):
            return {"min": data, "max": data}
        if isinstance(data, dict) and "min" in data and "max" not in data:
            return {**data, "max": data["min"]}
        return data

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.max < self.min:
            raise PydanticCustomError(
                "replicas_max_below_min",
                "option replicas: max ({max}) is below min ({min})",
                {"max": self.max, "min": self.min},
            )
        return self


class BackendOptions(BaseModel):
    """What every backend takes; each backend's model adds its own."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Whether the backend checks env and secrets as a launch starts, against who launches, rather than here.
    variables_checked_at_launch: ClassVar[bool] = False

    backend: Backend = Field(description="set from the request's backend")
    env: dict[str, str] = Field(
        default_factory=dict, description="variables for the server, e.g. OPENENV_MODE, ENABLE_WEB_INTERFACE"
    )
    secrets: dict[str, str] = Field(
        default_factory=dict, repr=False, description="passed to the server, never stored or shown"
    )
    replicas: ReplicaRange = Field(
        default_factory=ReplicaRange,
        description="servers behind the endpoint's one URL: a count N, or {'min': A, 'max': B} to scale with load",
    )
    private: bool = Field(
        default=False,
        description="the endpoint's URL needs its owner's Hub token, or the endpoint's own token, as a bearer "
        "(on the space backend the Space is private too)",
    )

    @model_validator(mode="before")
    @classmethod
    def _known(cls, data: Any) -> Any:
        """Unknown options are named with what the backend takes instead."""
        if isinstance(data, dict):
            own = sorted(set(cls.model_fields) - set(BackendOptions.model_fields) | {"replicas", "private"})
            unknown = sorted(set(data) - set(cls.model_fields))
            backend = data.get("backend", "")
            if unknown:
                raise ValueError(f"the {backend} backend takes {own}, not {unknown}")
        return data

    @field_validator("env", "secrets")
    @classmethod
    def _variables(cls, value: dict[str, str]) -> dict[str, str]:
        for name, content in value.items():
            if not _VARIABLE_NAME.match(name):
                raise ValueError(f"{name!r} is not a valid environment variable name")
            if len(content) > 16_384:
                raise ValueError(f"the value of {name} is over 16 KiB")
        refused = sorted(name for name in value if starts_the_interpreter(name))
        if refused and not cls.variables_checked_at_launch:
            raise ValueError(interpreter_refusal(refused))
        mode = value.get("OPENENV_MODE")
        if mode is not None and mode not in ("simulation", "production"):
            raise ValueError("OPENENV_MODE must be simulation or production")
        return value

    @field_validator("private", mode="before")
    @classmethod
    def _private(cls, value: Any) -> Any:
        if not isinstance(value, bool):
            raise ValueError("option private must be true or false")
        return value

    def own(self) -> dict[str, Any]:
        """The backend's own options, as the endpoint's row keeps them (no variables, no secrets)."""
        return self.model_dump(exclude={"backend", "env", "secrets"})


class ProcessOptions(BackendOptions):
    """A local environment folder run by uvicorn as a subprocess of envhub (forked from its zygote when it can)."""

    # The launch checks them (hosting.variables for a caller envhub does not trust, ProcessRuntime.check), so that
    # one refusal names every variable it will not take.
    variables_checked_at_launch: ClassVar[bool] = True

    backend: Literal[Backend.PROCESS] = Backend.PROCESS
    sandbox: bool = Field(
        default=False,
        description="run the server in a sandbox (bubblewrap) that shows it only the system's folders, Python's and "
        "its own, and no network but its own loopback; with sign-in on, every launch but the admin's is sandboxed",
    )

    @field_validator("sandbox", mode="before")
    @classmethod
    def _sandbox(cls, value: Any) -> Any:
        if not isinstance(value, bool):
            raise ValueError("option sandbox must be true or false")
        return value


class ImageOptions(BackendOptions):
    """What the container backends share: the image to run and the port it serves on."""

    image: Annotated[str, Field(min_length=1, max_length=512)] | None = Field(
        default=None,
        description="an image to run, e.g. registry.hf.space/owner-name:latest (the Hub's latest build of a "
        "Space); default: built from the folder, or from the Space's repo at the endpoint's commit",
    )
    port: Annotated[int, Field(gt=0, lt=65536)] | None = Field(
        default=None, description="the container's port; default: the manifest's, the card's app_port, or 8000"
    )

    @field_validator("image", mode="before")
    @classmethod
    def _image(cls, value: Any) -> Any:
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ValueError("option image must be an image name such as registry.hf.space/owner-name:latest")
        return value

    @field_validator("port", mode="before")
    @classmethod
    def _port(cls, value: Any) -> Any:
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not 0 < value < 65536):
            raise ValueError(f"option port must be the container's port number, got {value!r}")
        return value


class DockerOptions(ImageOptions):
    """A container: built from the folder's Dockerfile, or a Hub Space's image."""

    backend: Literal[Backend.DOCKER] = Backend.DOCKER


class SwarmOptions(ImageOptions):
    """A replicated Docker Swarm service: its tasks are the pool's replicas, placed on the swarm's nodes."""

    backend: Literal[Backend.SWARM] = Backend.SWARM
    constraints: list[Annotated[str, Field(min_length=3, max_length=256)]] = Field(
        default_factory=list, max_length=16, description="placement constraints, e.g. node.labels.gpu==true"
    )

    @field_validator("constraints", mode="before")
    @classmethod
    def _constraints(cls, value: Any) -> Any:
        if not isinstance(value, list) or not all(
            isinstance(c, str) and re.match(r"^[A-Za-z0-9_.-]+\s*(==|!=)\s*\S+$", c) for c in value
        ):
            raise ValueError(
                "option constraints must be a list such as ['node.labels.gpu==true', 'node.role!=manager']"
            )
        return value


class SpaceOptions(BackendOptions):
    """A Hugging Face Space: a template uploaded as a new Docker Space, a Hub environment duplicated."""

    backend: Literal[Backend.SPACE] = Backend.SPACE
    namespace: Annotated[str, Field(pattern=_NAME)] | None = Field(
        default=None, description="the user or organisation to create it in; default: the launching user"
    )
    name: Annotated[str, Field(pattern=_NAME)] | None = Field(
        default=None, description="the Space's name; default: the environment's"
    )
    hardware: str | None = Field(default=None, description="a Space hardware name such as cpu-basic or t4-small")
    sleep_time: Annotated[int, Field(ge=-1)] | None = Field(
        default=None, description="seconds idle before the Space sleeps, -1 for never"
    )
    delete_on_stop: bool = Field(default=False, description="delete the Space when the endpoint stops, not pause it")

    @field_validator("namespace", "name", mode="before")
    @classmethod
    def _hub_name(cls, value: Any) -> Any:
        if value is not None and (not isinstance(value, str) or not re.match(_NAME, value)):
            raise ValueError(f"option {value!r} is not a valid Space name, user or organisation")
        return value

    @field_validator("delete_on_stop", mode="before")
    @classmethod
    def _flag(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, bool):
            raise ValueError(f"option {info.field_name} must be true or false")
        return value

    @field_validator("sleep_time", mode="before")
    @classmethod
    def _seconds(cls, value: Any) -> Any:
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < -1):
            raise ValueError("option sleep_time must be seconds (an integer), or -1 for never")
        return value

    @field_validator("hardware", mode="before")
    @classmethod
    def _hardware(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, str):
            raise ValueError("option hardware must be a Space hardware name such as cpu-basic or t4-small")
        return value

    @field_validator("replicas", mode="after")
    @classmethod
    def _one_space(cls, value: ReplicaRange) -> ReplicaRange:
        if value.max > 1:
            raise PydanticCustomError(
                "space_one_server", "a Space is one server; run replicas with the process, docker or swarm backend"
            )
        return value

    @property
    def space_id(self) -> str:
        return f"{self.namespace}/{self.name}"


LaunchOptions = Annotated[ProcessOptions | DockerOptions | SwarmOptions | SpaceOptions, Field(discriminator="backend")]
BACKEND_OPTIONS: dict[Backend, type[BackendOptions]] = {
    Backend.PROCESS: ProcessOptions,
    Backend.DOCKER: DockerOptions,
    Backend.SWARM: SwarmOptions,
    Backend.SPACE: SpaceOptions,
}


class LaunchRequest(BaseModel):
    """An environment, the backend to run it on, and that backend's options."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    environment: str = Field(
        description="an environment id from the catalog; `id@<revision>` (7 or more characters) pins a revision"
    )
    backend: Backend = Backend.PROCESS
    options: LaunchOptions = Field(
        default_factory=ProcessOptions, description="the backend's options; their backend is the request's"
    )

    @model_validator(mode="before")
    @classmethod
    def _options_of_the_backend(cls, data: Any) -> Any:
        """Options are read as the request's backend's: its model tells them apart."""
        if not isinstance(data, dict):
            return data
        backend = data.get("backend", Backend.PROCESS)
        options = data.get("options")
        if backend not in set(Backend):
            return {k: v for k, v in data.items() if k != "options"}  # the backend field says what is wrong
        if options is None or isinstance(options, dict):
            return {**data, "options": {**(options or {}), "backend": backend}}
        return data

    @model_validator(mode="after")
    def _same_backend(self) -> Self:
        if self.options.backend != self.backend:
            raise ValueError(f"the options are for the {self.options.backend.value} backend, not {self.backend.value}")
        return self

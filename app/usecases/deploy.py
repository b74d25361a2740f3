"""Deploying envhub itself as a Docker Space: which files go, the Space's card, its variables and secrets."""

import re
import shutil
import string
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import yaml
from huggingface_hub import HfApi, SpaceInfo
from huggingface_hub.errors import HfHubHTTPError
from huggingface_hub.utils import httpx

from app.settings import REPO_ROOT

__all__ = [
    "APP_PATHS",
    "DEFAULT_VARIABLES",
    "README_TEMPLATE",
    "DeployError",
    "Deployed",
    "Deployment",
    "app_files",
    "deploy_space",
    "parse_assignment",
    "render_readme",
]

# What the Space needs to build and run envhub (see Dockerfile); everything else stays home.
APP_PATHS: tuple[str, ...] = (
    *(
        "app",
        "catalog",
        "conformance",
        "core",
        "envclient",
        "evals",
        "gateway",
        "hosting",
        "migrations",
        "protocol",
        "rollout",
    ),
    "spaces_templates",
    *("requirements.txt", "Dockerfile", ".dockerignore"),
)
_SKIPPED_DIRS = frozenset(
    {"__pycache__", ".git", ".venv", "venv", ".mypy_cache", ".pytest_cache", ".ruff_cache", "node_modules"}
)
_SKIPPED_SUFFIXES = (".pyc", ".pyo", ".db", ".db-wal", ".db-shm", ".log")
# A file at the top of spaces_templates/, so the template index (which takes subfolders) passes it by.
README_TEMPLATE = Path("spaces_templates") / "envhub.README.md"

# A hosted envhub is reachable by anyone: user-supplied URLs must not reach the Space's own network.
DEFAULT_VARIABLES: dict[str, str] = {
    "ENVHUB_ALLOW_PRIVATE_URLS": "false",
    "ENVHUB_SYNC_INTERVAL_S": "3600",
    "GRADIO_ANALYTICS_ENABLED": "False",
    "HF_HUB_DISABLE_TELEMETRY": "1",
}

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPACE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
_FRONT_MATTER = re.compile(r"\A---\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)


class DeployError(Exception):
    """A deployment step failed; the message says what failed and what to do."""


@dataclass(frozen=True)
class Deployment:
    """What to deploy where: the Space, its visibility and title, and the settings it runs with."""

    space_id: str
    private: bool = False
    title: str | None = None
    variables: Mapping[str, str] = field(default_factory=dict)
    secrets: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not _SPACE_ID.fullmatch(self.space_id) or ".." in self.space_id:
            raise DeployError(f"{self.space_id!r} is not a Space id: use OWNER/NAME, e.g. alice/envhub")
        for key in (*self.variables, *self.secrets):
            if not _KEY.fullmatch(key):
                raise DeployError(f"{key!r} is not a variable name: use letters, digits and _")
        both = sorted(set(self.variables) & set(self.secrets))
        if both:
            raise DeployError(f"{', '.join(both)} cannot be both a variable and a secret")


@dataclass(frozen=True)
class Deployed:
    space_id: str
    space_url: str
    app_url: str
    commit_url: str
    files: list[str]


def parse_assignment(text: str, environ: Mapping[str, str]) -> tuple[str, str]:
    """KEY=VALUE, or KEY alone to take the value from the environment (keeps secrets out of shell history)."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not _KEY.fullmatch(key):
        raise DeployError(f"{key!r} is not a variable name: use letters, digits and _")
    if not sep:
        if key not in environ:
            raise DeployError(f"{key} has no value: pass {key}=VALUE or set {key} in the environment")
        value = environ[key]
    return key, value


def app_files(root: Path = REPO_ROOT) -> list[str]:
    """The files a Space needs, as sorted POSIX paths relative to root: no caches, data, tests or virtualenvs."""
    found: list[str] = []
    for name in APP_PATHS:
        top = root / name
        if top.is_file():
            found.append(name)
            continue
        if not top.is_dir():
            raise DeployError(f"{top} is missing: deploy from an envhub source tree")
        for path in top.rglob("*"):
            relative = path.relative_to(root)
            if any(part in _SKIPPED_DIRS for part in relative.parts) or not path.is_file():
                continue
            if path.name.endswith(_SKIPPED_SUFFIXES) or path.is_symlink():
                continue
            found.append(relative.as_posix())
    return sorted(found)


def render_readme(template: str, space_id: str, app_url: str, title: str | None = None) -> str:
    """The Space's README.md: the template's front matter with this Space's title, and its body filled in."""
    match = _FRONT_MATTER.match(template)
    if match is None:
        raise DeployError(f"{README_TEMPLATE} has no front matter between --- lines")
    card: dict[str, Any] = yaml.safe_load(match.group(1)) or {}
    card["title"] = title or space_id.split("/", 1)[1]
    front = yaml.safe_dump(card, sort_keys=False, allow_unicode=True, width=1000)
    body = string.Template(template[match.end() :]).safe_substitute(
        title=card["title"], space_id=space_id, app_url=app_url
    )
    return f"---\n{front}---\n{body}"


def _explain(what: str, exc: Exception, endpoint: str, owner: str) -> DeployError:
    """One message for a failed Hub call: what failed, why, and what to do about it."""
    if isinstance(exc, HfHubHTTPError):
        status = exc.response.status_code
        said = exc.server_message or str(exc).splitlines()[0]
        if status == 401:
            hint = f"the Hub does not accept the token; create a write token at {endpoint}/settings/tokens"
        elif status == 403:
            hint = f"the token may not write to {owner!r}; use a token with write access to that namespace"
        elif status == 404:
            hint = f"check that {owner!r} exists and the token can see it"
        else:
            hint = "try again, or check the Hub's status"
        return DeployError(f"{what} failed: {status} {said}; {hint}")
    return DeployError(f"{what} failed: cannot reach the Hub at {endpoint} ({exc})")


def _find_space(api: HfApi, space_id: str) -> SpaceInfo | None:
    try:
        return api.space_info(space_id)
    except (httpx.HTTPError, OSError):
        return None


def _app_url(space_id: str, info: SpaceInfo | None) -> str:
    """The Space's app URL (https://<subdomain>.hf.space), computed the Hub's way when the Hub does not say."""
    if info is not None and info.host:
        return info.host.rstrip("/")
    subdomain = info.subdomain if info is not None and info.subdomain else re.sub(r"[^a-z0-9]+", "-", space_id.lower())
    return f"https://{subdomain}.hf.space"


def deploy_space(
    api: HfApi, deployment: Deployment, *, root: Path = REPO_ROOT, say: Callable[[str], None] = print
) -> Deployed:
    """Create or update the Space: one commit with the app's files and card, then its variables and secrets."""
    space_id = deployment.space_id
    owner = space_id.split("/", 1)[0]
    endpoint = api.endpoint.rstrip("/")

    def step(what: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except (httpx.HTTPError, OSError) as exc:
            raise _explain(what, exc, endpoint, owner) from None

    files = app_files(root)
    template = (root / README_TEMPLATE).read_text(encoding="utf-8")
    repo = step(
        f"creating the Space {space_id}",
        lambda: api.create_repo(
            space_id, repo_type="space", space_sdk="docker", private=deployment.private, exist_ok=True
        ),
    )
    space_url = str(repo)
    say(f"Space {space_id}: {space_url}")
    info = _find_space(api, space_id)
    app_url, before = _app_url(space_id, info), info.sha if info is not None else None
    if deployment.private and info is not None and info.private is False:
        say(f"note: {space_id} is public; --private only applies to a new Space (change it in the Space's settings)")
    readme = render_readme(template, space_id, app_url, deployment.title)

    with tempfile.TemporaryDirectory(prefix="envhub-deploy-") as staging:
        folder = Path(staging)
        for name in files:
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / name, folder / name)
        (folder / "README.md").write_text(readme, encoding="utf-8")
        # delete_patterns="*" removes what an earlier deploy uploaded and this one does not (the Hub keeps
        # .gitattributes); files uploaded in this commit are never deleted.
        commit = step(
            f"uploading {len(files) + 1} files to {space_id}",
            lambda: api.upload_folder(
                repo_id=space_id,
                repo_type="space",
                folder_path=folder,
                commit_message="Deploy envhub",
                delete_patterns="*",
            ),
        )
    if commit.oid == before:
        say(f"{len(files) + 1} files, unchanged since {commit.commit_url}")
    else:
        say(f"uploaded {len(files) + 1} files: {commit.commit_url}")

    variables = DEFAULT_VARIABLES | dict(deployment.variables)
    for key, value in variables.items():
        step(f"setting the variable {key}", partial(api.add_space_variable, space_id, key, value))
    say(f"variables: {', '.join(f'{k}={v}' for k, v in variables.items())}")
    for key, value in deployment.secrets.items():
        step(f"setting the secret {key}", partial(api.add_space_secret, space_id, key, value))
    if deployment.secrets:
        say(f"secrets (values not shown): {', '.join(deployment.secrets)}")
    return Deployed(space_id, space_url, app_url, commit.commit_url, [*files, "README.md"])

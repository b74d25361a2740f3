"""Indexing local template folders (OpenEnv environment Spaces on disk), with no network."""

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select, update
from sqlmodel import Session, col

from catalog.cards import MANIFEST_LIMIT, README_LIMIT, card_values, parse_manifest, parse_readme
from catalog.models import Environment, Source
from catalog.revisions import EnvironmentRevision, folder_hash
from catalog.store import interface_columns, write_environments
from core.clock import utcnow
from envclient.interface import Interface

log = logging.getLogger(__name__)

TEMPLATE_PREFIX = "template:"


def _read(path: Path, limit: int) -> tuple[bytes | None, bool]:
    if not path.is_file():
        return None, False
    with path.open("rb") as handle:
        content = handle.read(limit + 1)
    return content[:limit], len(content) > limit


def template_row(folder: Path) -> tuple[dict[str, Any], list[str]]:
    """The catalog row for one template folder, and the datasets its card names."""
    readme_raw, cut = _read(folder / "README.md", README_LIMIT)
    manifest_raw, _ = _read(folder / "openenv.yaml", MANIFEST_LIMIT + 1)
    values, fields = card_values(parse_readme(readme_raw, cut=cut), parse_manifest(manifest_raw))
    newest = max(p.stat().st_mtime for p in (folder / "README.md", folder / "openenv.yaml") if p.exists())
    row = {
        **values,
        "id": TEMPLATE_PREFIX + folder.name,
        "source": Source.TEMPLATE,
        "title": fields.title or folder.name,
        "author": None,
        "tags": fields.tags,
        "sdk": fields.sdk,
        "likes": 0,
        "trending_score": 0.0,
        "host": None,
        "runtime_stage": None,
        "path": str(folder.resolve()),
        "sha": folder_hash(folder),
        "last_modified": datetime.fromtimestamp(newest, UTC),
        "removed_at": None,
        "indexed_at": utcnow(),
    }
    return row, [d for d in fields.datasets if d.count("/") == 1]


def find_template_folders(roots: list[Path]) -> list[Path]:
    """Subfolders holding a README.md or openenv.yaml; the first folder of a name wins."""
    found: dict[str, Path] = {}
    for root in roots:
        if not root.is_dir():
            log.warning("template folder %s does not exist; skipped", root)
            continue
        for folder in sorted(root.iterdir()):
            if not folder.is_dir() or folder.name.startswith((".", "_")):
                continue
            if not ((folder / "README.md").is_file() or (folder / "openenv.yaml").is_file()):
                continue
            if folder.name in found:
                log.warning("template %s in %s is shadowed by %s", folder.name, root, found[folder.name])
                continue
            found[folder.name] = folder
    return list(found.values())


def _interface_of_revision(session: Session, environment_id: str, revision: str) -> None:
    """The row's interface columns as its app said them at this revision, or empty until it is read."""
    seen = session.get(EnvironmentRevision, (environment_id, revision))
    columns = seen.interface if seen is not None and seen.interface else interface_columns(Interface())
    session.execute(update(Environment).where(col(Environment.id) == environment_id).values(**columns))


def index_templates(engine: Engine, roots: list[Path]) -> int:
    """Make the catalog's template entries match the folders on disk; returns how many there are."""
    indexed = [template_row(folder) for folder in find_template_folders(roots)]
    rows = [row for row, _ in indexed]
    ids = [row["id"] for row in rows]
    with Session(engine) as session, session.begin():
        known = select(col(Environment.id), col(Environment.sha)).where(col(Environment.id).in_(ids))
        before = {environment: sha for environment, sha in session.execute(known)}
        if rows:
            write_environments(session, rows, {row["id"]: datasets for row, datasets in indexed})
        for row in rows:  # a folder that changed: what its app said before no longer holds
            if before.get(row["id"], row["sha"]) != row["sha"]:
                _interface_of_revision(session, row["id"], row["sha"])
        vanished = select(col(Environment.id)).where(
            col(Environment.source) == Source.TEMPLATE,
            col(Environment.id).not_in(ids),
            col(Environment.removed_at).is_(None),
        )
        session.execute(update(Environment).where(col(Environment.id).in_(vanished)).values(removed_at=utcnow()))
    log.info("indexed %d templates", len(rows))
    return len(rows)

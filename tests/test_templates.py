"""Template folders enter the catalog at start-up, with no network."""

from pathlib import Path

from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from tests.conftest import readme


def make_template(root: Path, name: str, card: str, manifest: str | None = None) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "README.md").write_text(readme(card, f"# {name}\n\nA template called {name}.\n"))
    if manifest is not None:
        (folder / "openenv.yaml").write_text(manifest)
    return folder


def test_templates_are_indexed_without_the_hub(settings: Settings, templates_dir: Path, tmp_path: Path) -> None:
    make_template(templates_dir, "maze", "title: Maze\nemoji: 🌀\ntags: [openenv, puzzle]", "name: maze\nport: 8000\n")
    make_template(templates_dir, "broken", "title: [oops")
    (templates_dir / "not-an-env").mkdir()
    extra = tmp_path / "extra"
    make_template(extra, "sudoku", "title: Sudoku\ntags: [openenv]")
    make_template(extra, "maze", "title: Shadowed maze")
    offline = settings.model_copy(update={"hf_endpoint": "http://127.0.0.1:9", "extra_templates": f"{extra}:/nowhere"})

    with TestClient(create_app(offline)) as client:
        found = client.get("/api/environments", params={"source": "template", "sort": "updated"}).json()
        assert sorted(e["id"] for e in found["data"]) == ["template:broken", "template:maze", "template:sudoku"]
        maze = client.get("/api/environments/template:maze").json()
        assert (maze["title"], maze["emoji"], maze["tags"]) == ("Maze", "🌀", ["openenv", "puzzle"])
        assert maze["manifest"] == {"name": "maze", "port": 8000}
        assert maze["path"] == str((templates_dir / "maze").resolve())
        assert maze["readme"].startswith("# maze")
        broken = client.get("/api/environments/template:broken").json()
        assert "not valid YAML" in broken["problems"][0]
        assert client.get("/api/environments", params={"q": "puzzle"}).json()["data"][0]["id"] == "template:maze"


def test_vanished_template_is_marked_removed(settings: Settings, templates_dir: Path) -> None:
    folder = make_template(templates_dir, "gone", "title: Gone soon")
    with TestClient(create_app(settings)) as client:
        assert client.get("/api/environments/template:gone").json()["removed_at"] is None
    (folder / "README.md").unlink()
    folder.rmdir()
    with TestClient(create_app(settings)) as client:
        assert client.get("/api/environments/template:gone").json()["removed_at"] is not None
        assert client.get("/api/environments", params={"source": "template"}).json()["count"] == 0

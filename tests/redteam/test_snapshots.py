"""A Hub Space's files, attacked: a Dockerfile that copies from outside its repo cannot make the process backend
serve from outside the Space's own snapshot (the admin's launch: nobody else runs Hub code as a process)."""

from pathlib import Path

import httpx

from tests.conftest import ADMIN_TOKEN
from tests.fakehub import FakeHub
from tests.serving import Envhub
from tests.test_process_hub import count_space

# The count environment under code/, served as its Dockerfile says, whose working folder is "copied" from two
# levels above the build context, where envhub keeps its data: uvicorn would start there, with that as its cwd.
ESCAPING = """FROM python:3.11-slim
COPY . /srv
COPY ../.. /outside
WORKDIR /outside
CMD ["python", "-m", "uvicorn", "--app-dir", "/srv/code", "app:app", "--host", "0.0.0.0", "--port", "7860"]
"""
WHERE = """

@app.get("/where")
def where():
    return {"cwd": os.getcwd()}
"""


def test_a_dockerfile_copying_from_outside_its_repo_serves_from_inside_it(hub: FakeHub, envhub: Envhub) -> None:
    files = count_space("manifest")
    readme = files.pop("README.md")
    files["server/app.py"] = files.pop("main.py") + WHERE
    files = {f"code/{path}": text for path, text in files.items() if path != "openenv.yaml"}
    files["code/app.py"] = files.pop("code/server/app.py")
    files |= {"README.md": readme, "Dockerfile": ESCAPING}
    hub.add_space("mallory/escape", files=files)
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    assert envhub.http.post("/api/sync?wait=true", headers=admin).json()["status"] == "ok"

    endpoint = envhub.running("mallory/escape", backend="process")
    cwd = Path(httpx.get(f"{endpoint['url']}/where", timeout=10).json()["cwd"]).resolve()
    snapshots = (envhub.settings.data_dir / "runtime" / "spaces").resolve()
    assert snapshots in cwd.parents, f"the server runs in {cwd}, outside the Space's snapshot"
    assert (cwd / "code" / "app.py").is_file()  # the Space's own root

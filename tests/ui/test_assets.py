"""Gradio's front-end bundles served from memory: the files of its build folder, by exact name, and nothing else."""

from pathlib import Path

from starlette.responses import PlainTextResponse
from starlette.testclient import TestClient
from starlette.types import Receive, Scope, Send

from app.ui.assets import FrontendAssets


def test_only_the_build_folders_files_are_served_and_every_other_request_goes_on(tmp_path: Path) -> None:
    build = tmp_path / "assets"
    (build / "fonts").mkdir(parents=True)
    (build / "Index-reaEz31n.js").write_text("export const x = 1;")
    (build / "fonts" / "Inter.woff2").write_bytes(b"\x00wOF2")
    (tmp_path / "secret.txt").write_text("not a bundle")
    passed: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        passed.append(f"{scope['method']} {scope['path']}")
        await PlainTextResponse("the app's answer", status_code=404)(scope, receive, send)

    client = TestClient(FrontendAssets(app, build))  # no lifespan: only requests
    bundle = client.get("/assets/Index-reaEz31n.js")
    assert bundle.status_code == 200 and bundle.text == "export const x = 1;"
    assert bundle.headers["content-type"] == "text/javascript; charset=utf-8"
    assert "immutable" in bundle.headers["cache-control"]  # a hashed name never changes in place
    font = client.get("/assets/fonts/Inter.woff2")
    assert font.content == b"\x00wOF2" and font.headers["cache-control"] == "no-cache"
    head = client.head("/assets/Index-reaEz31n.js")
    assert head.status_code == 200 and head.content == b"" and head.headers["content-length"] == "19"
    assert passed == []
    for path in ("/assets/../secret.txt", "/assets/%2e%2e/secret.txt", "/assets/missing.js", "/secret.txt"):
        assert client.get(path).text == "the app's answer"
    assert client.post("/assets/Index-reaEz31n.js").text == "the app's answer"
    assert len(passed) == 5 and passed[-1] == "POST /assets/Index-reaEz31n.js"

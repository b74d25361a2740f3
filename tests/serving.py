"""Running an OpenEnv environment folder as a real server for a test."""

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from app.settings import REPO_ROOT

TEMPLATES = REPO_ROOT / "spaces_templates"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def serve_template(folder: Path | str, *, env: dict[str, str] | None = None, timeout_s: float = 30) -> Iterator[str]:
    """Serve a template folder (a name under spaces_templates/ or a path) with uvicorn; yields its base URL."""
    path = TEMPLATES / folder if isinstance(folder, str) else folder
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "server.app:app", "--host", "127.0.0.1", "--port", str(port)],
        cwd=path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{path.name} exited with {process.returncode}: {process.stderr.read()[-2000:]}")  # type: ignore[union-attr]
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{path.name} did not answer /health within {timeout_s} s")
            time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()

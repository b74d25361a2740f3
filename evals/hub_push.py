"""A dataset leaves envhub for a repo on the Hub, pushed with the user's own token: its files, written to disk a
piece at a time (an export may be more than fits in memory), and its card."""

import io
import tempfile
from collections.abc import Iterable, Mapping
from contextlib import ExitStack
from typing import BinaryIO

from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError

from core.errors import ForbiddenError, InvalidInputError, UpstreamError

__all__ = ["push_dataset"]


def push_dataset(
    repo_id: str,
    files: Mapping[str, Iterable[str]],
    card: str,
    *,
    token: str | None,
    endpoint: str,
    private: bool,
    message: str,
) -> str:
    """Create (or reuse) the dataset repo and commit each file (path in the repo -> its text, in pieces) and the card
    as README.md; the repo's URL."""
    if not token:
        raise ForbiddenError(
            "pushing to the Hub acts with your Hub token: sign in, or send 'Authorization: Bearer <token>'"
        )
    if repo_id.count("/") != 1:
        raise InvalidInputError(f"name the dataset as namespace/name, not {repo_id!r}")
    api = HfApi(endpoint=endpoint, token=token, library_name="envhub")
    with ExitStack() as stack:
        written: dict[str, BinaryIO] = {}
        for path, pieces in files.items():
            spool = stack.enter_context(tempfile.TemporaryFile())
            for piece in pieces:
                spool.write(piece.encode())
            spool.seek(0)
            written[path] = spool
        written["README.md"] = io.BytesIO(card.encode())
        try:
            url = api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
            for path, content in written.items():
                api.upload_file(
                    path_or_fileobj=content,
                    path_in_repo=path,
                    repo_id=repo_id,
                    repo_type="dataset",
                    commit_message=message,
                )
        except HfHubHTTPError as exc:
            status = getattr(exc.response, "status_code", None)
            if status in (401, 403):
                raise ForbiddenError(
                    f"the Hub refused to write {repo_id} with your token (HTTP {status}); "
                    "push to your own namespace, or use a token that may write there",
                    code="hub_write_refused",
                ) from exc
            raise UpstreamError(f"pushing to {repo_id} on {endpoint} failed: HTTP {status}") from exc
    return str(url)

"""The web UI: browse, inspect, play and launch environments, mounted at / by create_app."""

from app.ui.context import UiContext
from app.ui.page import build_blocks, mount_ui
from app.ui.sessions import PlaySessions

__all__ = ["PlaySessions", "UiContext", "build_blocks", "mount_ui"]

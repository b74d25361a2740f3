"""The web UI: browse, inspect, play and launch environments, mounted at / by create_app (app.ui.page)."""

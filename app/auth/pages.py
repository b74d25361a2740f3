"""What the sign-in pages show and where they lead: the Sign out button, and the only places a sign-in may return to."""

import html


def safe_next(target: str | None) -> str:
    """Only a path on this server: an open redirect would hand a signed-in browser to anyone."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def logout_form(csrf_token: str, next: str = "/") -> str:
    """The Sign out button: a POST with the session's CSRF token, out of any frame (a Space shows envhub in one)."""
    return (
        '<form method="post" action="/auth/logout" target="_top" class="sign-out">'
        f'<input type="hidden" name="csrf_token" value="{html.escape(csrf_token)}">'
        f'<input type="hidden" name="next" value="{html.escape(safe_next(next))}">'
        '<button type="submit" id="sign-out">Sign out</button></form>'
    )

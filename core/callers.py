"""Who is asking, and what they may do: callers (a user, the admin, nobody in particular) and the access rule."""

from dataclasses import dataclass, field

from core.errors import ForbiddenError, UnauthorizedError

__all__ = ["ANONYMOUS", "Access", "Caller", "User"]


@dataclass(frozen=True)
class User:
    """A Hugging Face account, as whoami or the OpenID userinfo describes it."""

    name: str
    fullname: str = ""
    avatar_url: str | None = None


@dataclass(frozen=True)
class Caller:
    """Whoever made a request: a user (by session or Hub token), the admin, or nobody in particular."""

    user: User | None = None
    admin: bool = False
    token: str | None = field(default=None, repr=False)  # the user's Hub token, to act on the Hub as them
    session: str | None = field(default=None, repr=False)  # the session cookie, when that is how they came

    @property
    def name(self) -> str | None:
        return self.user.name if self.user else None


ANONYMOUS = Caller()


@dataclass(frozen=True)
class Access:
    """Who may launch, use and manage endpoints on this server, and whose process servers run as they ask.

    With sign-in on, an endpoint belongs to whoever launched it: only they or the admin stop it,
    and one launched by nobody in particular (an anonymous launch, when allowed) only the admin.
    With sign-in off nobody can be told apart, so anyone may stop an endpoint nobody owns.
    """

    sign_in: bool
    anonymous_launch: bool

    def may_launch(self, caller: Caller) -> bool:
        return caller.admin or caller.user is not None or self.anonymous_launch

    def ensure_may_launch(self, caller: Caller) -> None:
        if not self.may_launch(caller):
            raise UnauthorizedError(
                "sign in with Hugging Face (/auth/login) to launch, or send 'Authorization: Bearer <your Hub token>'",
                code="sign_in_required",
            )

    def trusts(self, caller: Caller) -> bool:
        """Whether the caller's process servers run as asked: with any variables, outside the sandbox. The admin's
        do, and anyone's on a server without sign-in (their own machine); on one with sign-in nobody else's."""
        return caller.admin or not self.sign_in

    def ensure_may_run_hub_code(self, caller: Caller, environment_id: str) -> None:
        """A Hub Space's own code, run as a process of this machine (no container around it): only a trusted
        caller's (see trusts)."""
        if not self.trusts(caller):
            raise ForbiddenError(
                f"the process backend runs {environment_id}'s code on this server's own machine, outside any "
                "container; with sign-in on only the admin may: launch it with the docker or space backend",
                code="hub_code_admin_only",
            )

    def may_manage(self, caller: Caller, owner: str | None) -> bool:
        """Whether the caller may stop what `owner` launched and see all of it (variables, log, servers, its token):
        its owner and the admin may; what nobody in particular launched, only the admin, or anyone without sign-in."""
        if caller.admin:
            return True
        if owner is None:
            return not self.sign_in
        return caller.user is not None and caller.user.name == owner

    def may_use(self, caller: Caller, owner: str | None, *, private: bool) -> bool:
        """Whether the caller may see and use an endpoint (or what was played on it): anything public is anyone's;
        a private one is only for who may manage it, and to anyone else it does not exist."""
        return not private or self.may_manage(caller, owner)

    def ensure_may_manage(self, caller: Caller, endpoint_id: str, owner: str | None) -> None:
        if self.may_manage(caller, owner):
            return
        if owner is None:
            raise ForbiddenError(
                f"endpoint {endpoint_id} was launched by nobody signed in; only an admin can stop it", code="not_owner"
            )
        raise ForbiddenError(
            f"endpoint {endpoint_id} was launched by {owner}; only they or an admin can stop it", code="not_owner"
        )

"""Settings: every one a person can set is in the README's tables, under the name they set it by."""

import re

from pydantic import AliasChoices

from app.settings import REPO_ROOT, Settings


def variable_names(name: str, alias: object) -> set[str]:
    """The environment variables that set a field: ENVHUB_<NAME>, or the names its aliases give (HF_TOKEN, ...)."""
    if isinstance(alias, AliasChoices):
        given = {str(choice) for choice in alias.choices if str(choice).isupper()}
        if given:
            return given
    return {f"ENVHUB_{name.upper()}"}


def test_every_setting_is_in_the_readmes_tables() -> None:
    rows = [line for line in (REPO_ROOT / "README.md").read_text().splitlines() if line.startswith("|")]
    documented = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", "\n".join(rows)))
    missing = {
        field: names
        for field, info in Settings.model_fields.items()
        if not (names := variable_names(field, info.validation_alias)) & documented
    }
    assert not missing, f"settings missing from the README's tables: {missing}"

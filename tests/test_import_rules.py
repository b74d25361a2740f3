"""The README's rules of which package may import which (its Development section), read from every module's imports."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("app", "gateway", "hosting", "evals", "rollout", "conformance", "catalog", "envclient", "protocol", "core")

# What each package may import of the others. The README says: nothing imports `app`; `rollout` imports only
# `protocol` and `core`; `gateway` imports only `protocol` and `core`; `core` is what every package may use (so it
# uses none of them); `protocol` is the vocabulary, with no I/O (so it uses only `core`), and `envclient` speaks it to
# an environment's server.
ALLOWED: dict[str, set[str]] = {
    "app": set(PACKAGES) - {"app"},
    "hosting": set(PACKAGES) - {"app"},
    "evals": set(PACKAGES) - {"app"},
    "conformance": set(PACKAGES) - {"app"},
    "catalog": set(PACKAGES) - {"app"},
    "rollout": {"envclient", "protocol", "core"},
    "gateway": {"protocol", "core"},
    "envclient": {"protocol", "core"},
    "protocol": {"core"},
    "core": set(),
}


def imported_packages(path: Path) -> set[str]:
    """The top-level packages of this project that a module imports (a relative import stays in its own)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found & set(PACKAGES)


def breaches(root: Path) -> list[str]:
    """Every import that goes against ALLOWED, as 'module imports package'."""
    broken = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            for imported in sorted(imported_packages(path) - ALLOWED[package] - {package}):
                broken.append(f"{path.relative_to(root)} imports {imported}")
    return broken


def test_every_product_module_keeps_the_readmes_import_rules() -> None:
    assert sum(1 for package in PACKAGES for _ in (ROOT / package).rglob("*.py")) > 200  # the modules were read
    assert breaches(ROOT) == []


def test_the_rules_are_the_ones_the_readme_states() -> None:
    development = " ".join((ROOT / "README.md").read_text().partition("## Development")[2].split())
    assert "Nothing imports `app`" in development
    assert "`rollout`, which imports only `envclient`, `protocol` and `core`" in development
    assert "`gateway` imports only `protocol` and `core`" in development

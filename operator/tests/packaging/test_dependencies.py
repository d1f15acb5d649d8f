"""The installed package imports only what it declares: an image built from `pip install .` starts."""

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
PACKAGE = REPO_ROOT / "operator" / "staticfleet"
# The analysis runs only with the `analytics` extra installed (`staticfleet analyze` imports it lazily);
# everything else needs the base install.
OPTIONAL = {"analytics": "analytics", "commands/analyze.py": "analytics"}


def requirement_name(requirement: str) -> str:
    name = re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def third_party_imports(source: Path) -> set[str]:
    tree = ast.parse(source.read_text(), filename=str(source))
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module.split(".")[0])
    return {m for m in modules if m not in sys.stdlib_module_names and m != "staticfleet"}


def declared() -> tuple[set[str], dict[str, set[str]]]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    base = {requirement_name(r) for r in project["dependencies"]}
    extras = {
        extra: {requirement_name(r) for r in requirements}
        for extra, requirements in project["optional-dependencies"].items()
    }
    return base, extras


def distributions_of(module: str) -> set[str]:
    return {requirement_name(d) for d in packages_distributions().get(module, [module])}


def test_every_module_imports_only_declared_distributions() -> None:
    base, extras = declared()
    missing: list[str] = []
    for source in sorted(PACKAGE.rglob("*.py")):
        relative = source.relative_to(PACKAGE).as_posix()
        extra = next((e for prefix, e in OPTIONAL.items() if relative.startswith(prefix)), "")
        allowed = base | extras.get(extra, set())
        for module in sorted(third_party_imports(source)):
            if not distributions_of(module) & allowed:
                missing.append(f"{source.relative_to(REPO_ROOT)} imports {module}")
    assert not missing, "not in pyproject's dependencies:\n" + "\n".join(missing)


def test_the_check_notices_an_undeclared_import(tmp_path: Path) -> None:
    source = tmp_path / "module.py"
    source.write_text("import os\nfrom cryptography import x509\nfrom . import sibling\n")
    assert third_party_imports(source) == {"cryptography"}
    assert requirement_name("kafka_python>=3.0") == "kafka-python"

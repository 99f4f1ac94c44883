"""The README: short, the two fresh-machine commands as CI runs them, links that resolve.

Its Python example runs in tests/test_docs.py, with the pages of docs/.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
CI = (ROOT / ".ci" / "run").read_text()

DEMO = "pip install torch==2.13.0 && pip install . && dlmsvdd demo"
TESTS = 'pip install torch==2.14.1 torchvision==0.29.1 && pip install ".[test]" && pytest -n auto'
DOCS_BUILD = 'pip install ".[docs]" && sphinx-build -W docs docs/_build/html'


def _section(heading: str) -> str:
    start = README.index(f"\n## {heading}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end > 0 else None]


def test_readme_is_at_most_200_lines():
    assert len(README.splitlines()) <= 200


def test_fresh_machine_commands_are_the_two_and_ci_runs_the_tests_one():
    blocks = re.findall(r"```bash\n(.*?)```", _section("On a fresh machine"), re.S)
    assert [b.strip() for b in blocks] == [DEMO, TESTS]
    commands = [line.strip() for line in CI.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert TESTS in commands


def test_ci_builds_the_docs_as_the_readme_says_after_the_tests():
    assert DOCS_BUILD in README
    commands = [line.strip() for line in CI.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert DOCS_BUILD in commands
    assert commands.index(TESTS) < commands.index(DOCS_BUILD)
    assert "set -euo pipefail" in CI  # a failing docs build fails CI


def test_docs_extra_installs_the_build():
    pyproject = (ROOT / "pyproject.toml").read_text()
    extra = re.search(r"^docs = \[(.*?)\]$", pyproject, re.S | re.M)
    assert extra is not None, "pyproject.toml has no docs extra"
    requirements = re.findall(r'"([^"]+)"', extra.group(1))
    needed = {"sphinx", "myst-parser", "pydata-sphinx-theme", "numpydoc", "sphinx-gallery", "matplotlib"}
    names = {re.split(r"[<>=!~\[ ]", requirement, maxsplit=1)[0].lower() for requirement in requirements}
    assert needed <= names
    assert any(r.startswith("dlmsvdd[") and "export" in r for r in requirements)  # the gallery's onnxruntime


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading (lower case, punctuation dropped, spaces to hyphens)."""
    text = re.sub(r"[`*_]", lambda m: "_" if m.group() == "_" else "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def test_readme_links_resolve():
    links = re.findall(r"\]\(([^)\s]+)\)", README)
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert len(local) >= 15
    for link in local:
        path, _, anchor = link.partition("#")
        target = ROOT / path
        assert target.exists(), link
        if anchor:
            headings = re.findall(r"^#+ (.+)$", target.read_text(), re.M)
            assert anchor in {_slug(h) for h in headings}, link


def test_readme_links_every_user_guide_page():
    guide = ROOT / "docs" / "user-guide"
    for page in guide.glob("*.md"):
        if page.name != "index.md":
            assert f"(docs/user-guide/{page.name})" in README, page.name
    for page in ("getting-started.md", "results/digits.md", "results/benchmarks.md", "results/adbench.md"):
        assert f"(docs/{page})" in README, page

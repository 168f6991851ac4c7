"""The code and the docs cite the design that lives in this repository (docs/design.md), by sections it has."""
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DESIGN = REPO / "docs" / "design.md"
CITED_SUFFIXES = {".py", ".md", ".html", ".txt"}
CITATION = re.compile(r"design §(\d+)(?:\.(\d+))?")
# The seed's specification by its old names (spelled in parts, so this file does not cite it itself).
FOREIGN_CITATION = re.compile("SPEC" + r"( §|\.md)|shared/" + "SPEC")


def _cited_files() -> list[Path]:
    roots = ["heteroflow_site", "scheduling", "tenants", "nodes", "plugins_admin", "templates", "docs", "tests"]
    files = [REPO / "README.md"]
    for root in roots:
        files += [path for path in (REPO / root).rglob("*") if path.suffix in CITED_SUFFIXES]
    return files


def _design_sections() -> set[str]:
    """§N and §N.M headings, and §N.M for the M-th numbered step of section §N (design §5.2 is bind's step 2)."""
    sections: set[str] = set()
    current = None
    for line in DESIGN.read_text().splitlines():
        heading = re.match(r"#+ §(\d+(?:\.\d+)?)\b", line)
        if heading:
            current = heading.group(1)
            sections.add(current)
            continue
        step = re.match(r"(\d+)\. ", line)
        if step and current and "." not in current:
            sections.add(f"{current}.{step.group(1)}")
    return sections


def test_no_file_cites_a_document_a_clone_lacks():
    offenders = [str(path.relative_to(REPO)) for path in _cited_files()
                 if re.search(FOREIGN_CITATION, path.read_text())]
    assert offenders == []


def test_every_cited_design_section_exists():
    sections = _design_sections()
    missing = set()
    for path in _cited_files():
        for major, minor in CITATION.findall(path.read_text()):
            cited = f"{major}.{minor}" if minor else major
            if cited not in sections:
                missing.add(f"{path.relative_to(REPO)}: §{cited}")
    assert sorted(missing) == []


def test_the_design_has_every_section_the_issues_cite():
    assert {"1", "5.2", "9", "15.9", "16.1", "16.2", "16.3", "16.4", "16.5"} <= _design_sections()

"""Relative links and images in the Markdown reports resolve to files that exist: the committed
docs/ (the generated reports among them: accuracy, hardware, claims, MQAR) and a report written
outside docs/ (the main job writes under out/)."""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: [text](target), ![alt](target), <img src="target">, and reference definitions "[name]: target"
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)|<img\s[^>]*src=\"([^\"]+)\""
                   r"|^\s*\[[^\]]+\]:\s*<?(\S+?)>?\s*$", re.M)


def relative_links(md: Path) -> list[str]:
    """The relative link targets of a Markdown file (code spans and fenced blocks left out)."""
    text = re.sub(r"```.*?```", "", md.read_text(), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    out = []
    for m in _LINK.finditer(text):
        target = next(g for g in m.groups() if g)
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL (http:, mailto:) or an anchor in the same file
        out.append(target)
    return out


def broken_links(md: Path) -> list[str]:
    from urllib.parse import unquote

    return [t for t in relative_links(md) if not (md.parent / unquote(t.split("#")[0])).exists()]


DOCS = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs").rglob("*.md")) + ["README.md"]


def test_the_link_finder():
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        md = Path(tmp, "r.md")
        (Path(tmp) / "a.png").write_bytes(b"")
        md.write_text("![a](a.png) [b](missing.md#x) [c](https://x.org) [d](#top) `[e](code.md)`\n"
                      "<img src=\"gone.png\">\n[ref]: other.md\n```\n[f](block.md)\n```\n")
        assert relative_links(md) == ["a.png", "missing.md#x", "gone.png", "other.md"]
        assert broken_links(md) == ["missing.md#x", "gone.png", "other.md"]


@pytest.mark.parametrize("doc", DOCS)
def test_committed_docs_link_to_files_that_exist(doc):
    assert broken_links(REPO / doc) == []


def test_accuracy_report_links_resolve_outside_docs(tmp_path):
    """The accuracy README links docs/fixed-point.md relative to where it is written (out/main/accuracy
    for the main job, docs/accuracy for ``specmem accuracy``), and its plots beside it."""
    from specmem.golden.fixed.accuracy import write_accuracy_report

    out = tmp_path / "out" / "main" / "accuracy"
    path = Path(write_accuracy_report(str(out), T=32, long_T=100, small=True, d=8, k=2, progress=lambda m: None))
    links = relative_links(path)
    assert any(t.endswith("docs/fixed-point.md") for t in links) and "annihilation.png" in links
    assert broken_links(path) == []

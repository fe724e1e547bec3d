"""Issue 15 item 2: ``make run`` writes only under ``out/`` (git-ignored), so the checkout stays clean."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_make_run_targets_the_ignored_out_folder():
    """The Makefile's run target is the main job with its default --out, and that folder is ignored."""
    from specmem.cli import build_parser

    makefile = (REPO / "Makefile").read_text()
    recipe = makefile.split("\nrun:", 1)[1].splitlines()[1].strip()
    assert recipe == "$(VENV)/bin/specmem main", recipe
    out = build_parser().parse_args(["main"]).out
    assert out.startswith("out/")
    if shutil.which("git") and (REPO / ".git").exists():
        res = subprocess.run(["git", "check-ignore", "-q", out + "/summary.json"], cwd=REPO)
        assert res.returncode == 0, f"{out} is not git-ignored"


@pytest.mark.slow
def test_main_job_leaves_a_fresh_clone_clean(tmp_path):
    """End to end (minutes): the main job (this checkout's installed code) run from the root of a
    fresh clone of HEAD, then ``git status --porcelain`` there prints nothing."""
    if not shutil.which("git") or not (REPO / ".git").exists():
        pytest.skip("needs git and a git checkout")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    env = {**os.environ, "CI": "1"}
    res = subprocess.run([sys.executable, "-m", "specmem", "main"], cwd=clone, env=env, capture_output=True,
                         text=True, timeout=1800)
    assert res.returncode == 0, res.stderr[-2000:]
    assert (clone / "out" / "main" / "summary.json").exists()
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True)
    assert status.stdout == "", status.stdout

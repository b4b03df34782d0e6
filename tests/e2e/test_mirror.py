"""tests/mirror, which the kept arm64 and fuzz builds read their sources
from: an unchanged file keeps its time (cargo then rebuilds nothing), a
changed one is rewritten, a deleted one goes, and nothing ignored by git
(models, venvs, build output) is copied."""

import os
import subprocess

from harness import REPO

MIRROR = REPO / "tests" / "mirror"


def test_only_changed_files_are_written_and_deleted_ones_removed(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "tests").mkdir()
    (src / "tests" / "mirror").write_bytes(MIRROR.read_bytes())
    os.chmod(src / "tests" / "mirror", 0o755)
    (src / ".gitignore").write_text("/target\n")
    (src / "a.rs").write_text("fn a() {}\n")
    (src / "b.rs").write_text("fn b() {}\n")
    (src / "target").mkdir()
    (src / "target" / "big").write_text("build output\n")
    (src / ".deps").mkdir()
    (src / ".deps" / "c.h").write_text("int c;\n")
    subprocess.run(["git", "init", "-q", str(src)], check=True)
    subprocess.run(["git", "-C", str(src), "add", "."], check=True)

    dest = tmp_path / "mirror"
    run = lambda: subprocess.run([str(src / "tests" / "mirror"), str(dest)],
                                 check=True, capture_output=True, text=True).stderr
    assert "5 files written, 0 removed" in run()
    assert not (dest / "target").exists()
    assert (dest / ".deps" / "c.h").read_text() == "int c;\n"
    assert os.access(dest / "tests" / "mirror", os.X_OK)

    # Nothing changed: nothing written, the times as they were.
    old = 1_000_000_000
    for name in ("a.rs", "b.rs"):
        os.utime(dest / name, (old, old))
    (src / "a.rs").touch()
    assert "0 files written, 0 removed" in run()
    assert (dest / "a.rs").stat().st_mtime == old

    # A change is written (a new time), a deleted file goes, an untracked
    # new one comes.
    (src / "a.rs").write_text("fn a() { b() }\n")
    (src / "b.rs").unlink()
    (src / "new.rs").write_text("fn n() {}\n")
    assert "2 files written, 1 removed" in run()
    assert (dest / "a.rs").read_text() == "fn a() { b() }\n" and (dest / "a.rs").stat().st_mtime > old
    assert not (dest / "b.rs").exists() and (dest / "new.rs").exists()

    # Never into the repository itself.
    refused = subprocess.run([str(src / "tests" / "mirror"), str(src / "sub")], capture_output=True, text=True)
    assert refused.returncode == 2 and "inside the repository" in refused.stderr

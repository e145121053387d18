"""msprof cann-tree: CANN's two msprof entry points under a directory, found as torch_npu finds them and run as
MindSpore runs them (docs/ecosystem-target.md §6.3), on a real copy of the bundled PROF_ sample."""
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

DEMO = ROOT / "msprof" / "demo_data" / "PROF_000001_20241123120000000_DEMOYOLOV3MISHSAMPLE"
ANALYSIS = Path("tools/profiler/profiler_tool/analysis/msprof/msprof.py")


def _tree(tmp_path, msprof_cli):
    tree = tmp_path / "cann"
    made = msprof_cli("cann-tree", tree)
    assert made.returncode == 0, made.stderr
    return tree, made


def _clean_env():
    """An environment in which msprof is only reachable through the tree (no PYTHONPATH, no venv on PATH)."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def test_the_tree_is_found_as_torch_npu_finds_it(tmp_path, msprof_cli):
    tree, made = _tree(tmp_path, msprof_cli)
    bin_dir = tree / "tools" / "profiler" / "bin"
    assert made.stdout == f"export PATH={bin_dir.resolve()}:$PATH\n"
    assert "msprof first on PATH now:" in made.stderr
    # torch_npu: which msprof, its realpath cut at the first "tools", then the analysis script below it
    found = shutil.which("msprof", path=str(bin_dir))
    prefix = os.path.realpath(found).split("tools")[0]
    assert Path(prefix) / ANALYSIS == tree.resolve() / ANALYSIS and (tree / ANALYSIS).is_file()
    for program in (bin_dir / "msprof", tree / ANALYSIS):
        assert not program.is_symlink()
        mode = stat.S_IMODE(program.stat().st_mode)
        assert mode == 0o750, oct(mode)          # (msprof's umask 0027: nothing for others to write)
    version = subprocess.run([str(bin_dir / "msprof"), "--version"], env=_clean_env(), capture_output=True,
                             text=True, timeout=60, cwd=tmp_path)
    assert (version.returncode, version.stdout) == (0, "msprof, version 0.1.0\n"), version.stderr


def test_the_analysis_script_runs_msprof_as_mindspore_calls_it(tmp_path, msprof_cli):
    tree, _made = _tree(tmp_path, msprof_cli)
    direct, through = tmp_path / "direct", tmp_path / "through"
    for copy in (direct, through):
        shutil.copytree(DEMO, copy / DEMO.name)
    ran = msprof_cli("export", "summary", "-dir", direct / DEMO.name, "--model-id", 1, "--iteration-id", 1)
    assert ran.returncode == 0, ran.stderr
    # MindSpore: python3 msprof.py export summary -dir D --model-id M --iteration-id I --iteration-count 1
    proc = subprocess.run(["python3", str(tree / ANALYSIS), "export", "summary", "-dir", str(through / DEMO.name),
                           "--model-id", "1", "--iteration-id", "1", "--iteration-count", "1"],
                          env=_clean_env(), capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    name = "device_0/summary/op_summary_model1_iter1.csv"
    ours, theirs = (direct / DEMO.name / name).read_bytes(), (through / DEMO.name / name).read_bytes()
    assert ours == theirs and ours.startswith(b"Device_id,")
    more = subprocess.run(["python3", str(tree / ANALYSIS), "export", "summary", "-dir", str(through / DEMO.name),
                           "--iteration-count=2"], env=_clean_env(), capture_output=True, text=True, timeout=60)
    assert (more.returncode, more.stderr) == (
        2, "msprof.py: --iteration-count 2: msprof exports one execution at a time\n")


def test_a_directory_torch_npu_would_cut_wrongly_or_a_file_not_ours_is_refused(tmp_path, msprof_cli):
    wrong = msprof_cli("cann-tree", tmp_path / "devtools" / "x")
    assert wrong.returncode == 2 and "holds 'tools'" in wrong.stderr, wrong.stderr
    assert not (tmp_path / "devtools").exists()
    tree = tmp_path / "cann"
    theirs = tree / "tools" / "profiler" / "bin" / "msprof"
    theirs.parent.mkdir(parents=True)
    theirs.write_text("#!/bin/sh\n# CANN's own\n")
    refused = msprof_cli("cann-tree", tree)
    assert refused.returncode == 7 and "was not written by msprof cann-tree" in refused.stderr, refused.stderr
    assert theirs.read_text() == "#!/bin/sh\n# CANN's own\n"
    assert _tree(tmp_path / "again", msprof_cli)[1].returncode == 0       # (ours is replaced: run twice)
    assert msprof_cli("cann-tree", tmp_path / "again" / "cann").returncode == 0
    assert sys.executable in (tmp_path / "again" / "cann" / "tools/profiler/bin/msprof").read_text()

"""A hostile board behind a real OpenSSH sshd (issue 35 items 7, 14 and 15): it cannot fill the local disk or
its inodes, two collects into one --output do not share their bookkeeping, and what the board's app prints
cannot drive the terminal. The board's tools are small scripts put first on its PATH (the ini's
remote_path); its app is a few lines of Python (test_collect_ssh.hostile_project).
"""
import json
import os
import pty
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_collect_ssh import (board_command, board_user, env, hostile_project, local_jobs, remote_jobs,  # noqa: E402,F401
                              single_job, sshd, tree_digest)

pytestmark = pytest.mark.ssh
TAR = shutil.which("tar")

# A board's tar that sends the JOB and then what its listing does not hold. argv: -C DIR -cf - JOB.
EXTRA_TAR = """#!/usr/bin/env python3
import os, sys, tarfile
directory, job = sys.argv[2], sys.argv[-1]
class Zeros:
    def read(self, n):
        return bytes(n)
out = tarfile.open(fileobj=sys.stdout.buffer, mode="w|")
KIND = %r
if KIND == "size":          # a listed file sent as 8 MiB
    for root, dirs, files in os.walk(os.path.join(directory, job)):
        for name in files:
            info = out.gettarinfo(os.path.join(root, name), os.path.relpath(os.path.join(root, name), directory))
            info.size = 8 << 20
            out.addfile(info, Zeros())
            break
else:
    out.add(os.path.join(directory, job), arcname=job)
if KIND == "big":           # one file the listing does not hold, larger than the local disk
    info = tarfile.TarInfo(job + "/data/extra.bin")
    info.size = 32 << 20
    out.addfile(info, Zeros())
if KIND == "many":          # more files than the local inodes
    for i in range(3000):
        info = tarfile.TarInfo(job + "/data/e%%d" %% i)
        info.size = 1
        out.addfile(info, Zeros())
out.close()
"""


def _partial_jobs(output: Path):
    partial = output / ".partial"
    return sorted(p.name for p in partial.iterdir() if p.name != "collect-state.json") if partial.exists() else []


@pytest.mark.parametrize("kind, said", [
    ("big", "holds 'JOBX1/data/extra.bin' of 33554432 bytes, which its listing of JOBX1 shows as not there at all"),
    ("many", "holds 'JOBX1/data/e0' of 1 bytes, which its listing of JOBX1 shows as not there at all"),
    ("size", "of 8388608 bytes, which its listing of JOBX1 shows as a file of"),
])
def test_a_tar_stream_is_checked_against_the_listing_before_anything_is_written(env, tmpfs, kind, said):
    """Tar members the listing does not hold (a file larger than the disk, more files than its inodes, a listed
    file sent larger) are refused before any of them is written: exit 4, the JOB left on the board, the local
    disk as empty as before, no .partial left."""
    point = tmpfs("size=4m,nr_inodes=400")
    env.output = point / "out"
    fakebin = board_command(env, "tar", "")
    (fakebin / "tar").write_text(EXTRA_TAR % kind)
    env.write_ini(remote_path=fakebin, transfer="tar")
    main = hostile_project(env, 'job(b"JOBX1")\n')
    proc = env.collect("-m", main, "--remote-dir", f"msprof-tar-{kind}")
    remote = env.remote_dir(f"msprof-tar-{kind}")
    try:
        assert proc.returncode == 4, proc.err
        assert said in proc.err, proc.err
        assert "1 JOB directory not pulled" in proc.err and "Traceback" not in proc.err
        assert local_jobs(env.output) == [] and _partial_jobs(env.output) == []
        assert shutil.disk_usage(point).used < 256 * 1024
        assert [p.name for p in remote_jobs(remote)] == ["JOBX1"]        # left on the board, not lost
    finally:
        shutil.rmtree(remote, ignore_errors=True)
        shutil.rmtree(fakebin, ignore_errors=True)


def test_a_stream_larger_than_its_listing_is_not_read_to_its_end(tmp_path):
    """A header that claims more than the listing could need (here a 4 MiB pax header on a 3-byte file) is
    refused once the stream passes what an honest tar of the listing sends, before it is held in memory."""
    import io
    import tarfile

    from msprof.collect.listing import Manifest, RemoteFile
    from msprof.collect.pull import extract_tar
    from msprof.errors import RemoteError

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        info = tarfile.TarInfo("JOBA/a")
        info.size, info.pax_headers = 3, {"comment": "x" * (4 << 20)}
        tf.addfile(info, io.BytesIO(b"abc"))
    buf.seek(0)
    found = Manifest("JOBA", dirs=["JOBA"], files={"JOBA/a": RemoteFile("JOBA/a", 3, 0o644, 0)})
    with pytest.raises(RemoteError, match="tar stream of JOBA is larger than its listing allows"):
        extract_tar(buf, found, tmp_path)
    assert buf.tell() <= 3 << 20 < len(buf.getvalue()) and not (tmp_path / "JOBA" / "a").exists()


def test_too_few_inodes_is_exit_6_before_anything_is_written(env, tmpfs):
    """The free-space check counts inodes too: a JOB of 600 files into a disk with 300 free inodes is exit 6
    before the pull, nothing written, the data left on the board for a resume."""
    point = tmpfs("size=16m,nr_inodes=300")
    env.output = point / "out"
    main = hostile_project(env, 'job(b"JOBMANY1", files=[b"info.json.0"] + [b"data/f%d" % i for i in range(600)])\n')
    proc = env.collect("-m", main, "--remote-dir", "msprof-inodes")
    remote = env.remote_dir("msprof-inodes")
    try:
        assert proc.returncode == 6, proc.err
        assert f"not enough free inodes in {env.output}: the JOB directories need 604 files and directories" in proc.err
        assert "--resume" in proc.err and "Traceback" not in proc.err
        assert local_jobs(env.output) == [] and _partial_jobs(env.output) == []
        assert [p.name for p in remote_jobs(remote)] == ["JOBMANY1"]
    finally:
        shutil.rmtree(remote, ignore_errors=True)


def test_a_disk_filled_during_the_pull_leaves_no_partial_and_resume_works(env, tmpfs):
    """Something fills the local disk while the JOB is pulled (here the board's tar, the board being this very
    machine): exit 6, what the pull wrote is removed (the disk is not left full), the record stays; once
    there is room, --resume pulls the JOB, byte for byte the board's."""
    point = tmpfs("size=8m,mode=0777")
    env.output = point / "out"
    fakebin = board_command(env, "tar", f'[ -e {point}/filled ] || {{ touch {point}/filled; '
                                        f'dd if=/dev/zero of={point}/filler bs=1M count=6 2>/dev/null; }}\n'
                                        f'exec {TAR} "$@"')
    env.write_ini(remote_path=fakebin, transfer="tar")
    main = env.project(sim={"write_bytes": 3 << 20})
    proc = env.collect("-m", main, "--keep-remote")
    remote = None
    try:
        assert proc.returncode == 6, proc.err
        assert f"local disk full while writing {env.output}/.partial/JOB" in proc.err, proc.err
        assert local_jobs(env.output) == [] and _partial_jobs(env.output) == []
        assert (env.output / ".partial" / "collect-state.json").is_file()
        remote = Path(json.loads((env.output / ".partial" / "collect-state.json").read_text())["remote_dir"])
        os.unlink(point / "filler")
        proc = env.collect("--resume")
        assert proc.returncode == 0, proc.err
        job = single_job(env.output)
        [board_job] = remote_jobs(remote)
        assert tree_digest(job) == tree_digest(board_job)
        assert not (env.output / ".partial").exists()
    finally:
        shutil.rmtree(fakebin, ignore_errors=True)
        if remote is not None:
            shutil.rmtree(remote, ignore_errors=True)


def test_a_collect_waits_while_another_holds_its_output(env):
    """Two collects into one --output take turns: while one holds the directory's lock (here the test holds it,
    as a collect would), the other says so and waits; once it is released, the other runs to its end."""
    import fcntl

    main = env.project(sim={"job_name": "JOBWAIT1"})
    env.output.mkdir(parents=True, exist_ok=True)
    fd = os.open(env.output, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    cmd = [sys.executable, "-m", "msprof", "collect", "--config", str(env.ini), "--output", str(env.output),
           "-m", str(main)]
    proc = subprocess.Popen(cmd, cwd=env.tmp, env=env.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        said = b""
        deadline = time.monotonic() + 120
        while b"waiting for it to finish" not in said and proc.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stderr], [], [], 1)
            if ready:
                said += os.read(proc.stderr.fileno(), 4096)
        assert f"another msprof collect is pulling into {env.output}; waiting for it to finish".encode() in said
        assert proc.poll() is None and not local_jobs(env.output)       # nothing pulled while it waits
    finally:
        os.close(fd)                                                    # the lock goes with it
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, (said + err).decode("utf-8", "replace")
    assert local_jobs(env.output) == ["JOBWAIT1"]


def test_a_second_collect_of_a_job_of_the_same_name_keeps_both(env):
    """A second collect into the same --output pulling a JOB of a name already there (another board's) does
    not mix the two: it says plainly that the local one differs (exit 2), keeps the first whole and its own
    data on the board, recorded for a resume."""
    main = env.project(sim={"job_name": "JOBSAME1"})
    try:
        first = env.collect("-m", main, "--keep-remote", "--remote-dir", "msprof-first")
        assert first.returncode == 0, first.err
        second = env.collect("-m", main, "--keep-remote", "--remote-dir", "msprof-second")
        assert second.returncode == 2, second.err
        assert f"{env.output}/JOBSAME1 already exists and differs from the board's JOBSAME1" in second.err
        assert tree_digest(env.output / "JOBSAME1") == tree_digest(env.remote_dir("msprof-first") /
                                                                  "msprof_output" / "JOBSAME1")
        assert _partial_jobs(env.output) == []
        assert "msprof-second" in (env.output / ".partial" / "collect-state.json").read_text()
    finally:
        for name in ("msprof-first", "msprof-second"):
            shutil.rmtree(env.remote_dir(name), ignore_errors=True)


ESCAPES_BODY = r'''import sys
job(b"JOBTTY1")
sys.stdout.buffer.write(b"\x1b[2J\x1b]0;owned\x07\xe2\x80\xaetxt.exe\tok\n")
sys.stdout.buffer.flush()
sys.stderr.buffer.write(b"\x1b[31mred\xc2\x9b\x9b\n")
'''


def _on_a_terminal(cmd, env, cwd, timeout=120) -> (int, bytes):
    """Run ``cmd`` with stdout and stderr on a pseudo-terminal: (exit status, all it wrote)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    data = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:         # (EIO: every writer has closed the terminal)
                break
            if not chunk:
                break
            data += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    return proc.wait(timeout=10), data


def test_the_boards_output_cannot_drive_the_terminal(env):
    """What the board's app prints reaches a terminal with escape sequences, C1 controls and bidirectional
    controls escaped (tabs and line breaks kept), and a pipe byte for byte."""
    main = hostile_project(env, ESCAPES_BODY)
    cmd = [sys.executable, "-m", "msprof", "collect", "--config", str(env.ini), "--output", str(env.output),
           "-m", str(main)]
    status, shown = _on_a_terminal(cmd, env.env, env.tmp)
    assert status == 0, shown
    assert b"\\x1b[2J\\x1b]0;owned\\x07\\u202etxt.exe\tok\r\n" in shown, shown
    assert b"\\x1b[31mred\\u009b\\x9b\r\n" in shown, shown
    for raw in (b"\x1b[2J", b"\x1b]0;", b"\x07", b"\xe2\x80\xae", b"\x1b[31m", b"\x9b"):
        assert raw not in shown
    shutil.rmtree(env.output)
    proc = env.collect("-m", main)            # (into a pipe)
    assert proc.returncode == 0, proc.err
    assert proc.stdout.startswith(b"\x1b[2J\x1b]0;owned\x07\xe2\x80\xaetxt.exe\tok\n")
    assert b"\x1b[31mred\xc2\x9b\x9b\n" in proc.stderr

"""msprof collect against a REAL OpenSSH sshd on 127.0.0.1 (no mocks).

The "board" is this machine seen through sshd as a throw-away user, so the tests can read what the board
wrote directly from that user's home dir (with --keep-remote) and compare it byte for byte.
"""
import contextlib
import hashlib
import json
import os
import pwd
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sshd_harness  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
FIXTURE_BOARD = REPO / "fixtures" / "board"
STUB_BOARD = Path(__file__).resolve().parent / "board_stub"

pytestmark = pytest.mark.ssh
_REASON = sshd_harness.skip_reason()
if _REASON:
    pytest.skip(_REASON, allow_module_level=True)


# -- fixtures ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    server = sshd_harness.SshdServer(tmp_path_factory.mktemp("sshd")).start()
    server.write_known_hosts()
    yield server
    server.stop()
    print("\n--- sshd.log (tail) ---\n" + server.log_path.read_text(errors="replace")[-2000:])


@pytest.fixture(scope="module")
def board_user(sshd, system_user):
    """The suite's throw-away user (tests/conftest.py) as the board login, by password or this sshd's key."""
    sshd_harness.install_user_key(system_user.name, (sshd.client_key.with_suffix(".pub")).read_text())
    entry = system_user.entry
    return {"name": system_user.name, "password": system_user.password, "home": Path(entry.pw_dir),
            "uid": entry.pw_uid}


class Env:
    """One test's local side: a fresh HOME, an ini, a project copy and an output dir."""

    def __init__(self, tmp: Path, sshd, user):
        self.tmp, self.sshd, self.user = tmp, sshd, user
        self.home = tmp / "home"
        self.home.mkdir()
        self.output = tmp / "out"
        self.ini = tmp / "board.ini"
        self.env = {k: v for k, v in os.environ.items() if k not in ("SSH_AUTH_SOCK", "MSPROF_SSH_PASSWORD")}
        self.env.update(HOME=str(self.home), NO_COLOR="1", PYTHONPATH=str(REPO))
        self.secrets = [user["password"]]
        self.write_ini()

    def write_ini(self, **keys):
        values = {"ip": "127.0.0.1", "port": self.sshd.port, "username": self.user["name"],
                  "pwd": self.user["password"], "known_hosts": self.sshd.known_hosts}
        values.update(keys)
        lines = ["[ssh_config]"] + [f"{k} = {v}" for k, v in values.items() if v is not None]
        self.ini.write_text("\n".join(lines) + "\n")
        os.chmod(self.ini, 0o600)
        return self.ini

    def project(self, source: Path = STUB_BOARD, sim: dict = None) -> Path:
        project = self.tmp / "project"
        shutil.copytree(source, project, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        if sim is not None:
            (project / "sim.json").write_text(json.dumps(sim))
        return project / "main"

    def remote_dir(self, name: str) -> Path:
        return self.user["home"] / name

    def collect(self, *args, check_secret=True, env=None, timeout=120, verbose=False):
        cmd = [sys.executable, "-m", "msprof", *(["-v"] if verbose else []), "collect", "--config", str(self.ini),
               "--output", str(self.output), *map(str, args)]
        proc = subprocess.run(cmd, cwd=self.tmp, env=dict(self.env, **(env or {})), capture_output=True,
                              timeout=timeout)
        proc.out = proc.stdout.decode("utf-8", "replace")
        proc.err = proc.stderr.decode("utf-8", "replace")
        if check_secret:
            self.assert_no_secret(proc)
        return proc

    def assert_no_secret(self, proc=None):
        for secret in self.secrets:
            if proc is not None:
                assert secret.encode() not in proc.stdout + proc.stderr, "password leaked to the terminal"
            if self.output.exists():
                for path in self.output.rglob("*"):
                    if path.is_file():
                        assert secret.encode() not in path.read_bytes(), f"password leaked into {path}"


@pytest.fixture
def env(tmp_path, sshd, board_user):
    return Env(tmp_path, sshd, board_user)


def tree_digest(root: Path, skip=("collect.json",)):
    """{relative path: (sha256, size)} of every regular file under root."""
    result = {}
    for path in sorted(Path(root).rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and rel not in skip:
            result[rel] = (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_size)
    return result


def single_job(output: Path) -> Path:
    jobs = [p for p in output.iterdir() if p.name.startswith("JOB")]
    assert len(jobs) == 1, jobs
    return jobs[0]


def remote_jobs(remote: Path):
    return sorted((remote / "msprof_output").glob("JOB*"))


def user_processes(uid: int):
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    pids.append(int(entry))
            except OSError:
                pass
    return pids


# -- the happy path ------------------------------------------------------------------------------------
def test_happy_path_byte_identical(env):
    """Password auth, the fixture board simulator, tar pull: pulled JOB == what the board wrote."""
    if not (FIXTURE_BOARD / "main").exists():
        pytest.skip("fixtures/board/main (the board simulator) is not in the tree yet")
    main = env.project(FIXTURE_BOARD)
    (main.parent / "acl.json").write_text(json.dumps({"dump": {"dump_path": "/tmp/d"}, "other": {"k": 1}}))
    proc = env.collect("-m", main, "--keep-remote", "--remote-dir", "msprof-happy", "--interval", "0",
                       "--aac-metrics", "ArithmeticUtilization")
    assert proc.returncode == 0, proc.err
    assert "dump section" in proc.err
    remote = env.remote_dir("msprof-happy")
    try:
        acl = json.loads((remote / "acl.json").read_text())
        assert acl["profiler"]["switch"] == "on" and acl["profiler"]["output"] == str(remote / "msprof_output")
        assert "dump" not in acl and acl["other"] == {"k": 1}
        assert os.stat(remote / "main").st_mode & stat.S_IXUSR
        assert not (remote / "board.ini").exists()
        [board_job] = remote_jobs(remote)
        job = single_job(env.output)
        assert job.name == board_job.name
        assert tree_digest(job) == tree_digest(board_job)
        record = json.loads((job / "collect.json").read_text())
        assert record["board"] == {"host": "127.0.0.1", "port": env.sshd.port, "username": env.user["name"]}
        assert record["acl_json"]["profiler"]["aac_metrics"] == "ArithmeticUtilization"
        assert record["main_exit_status"] == 0 and record["transfer"] == "tar"
        assert str(job) in proc.out
        assert not (env.output / ".partial").exists()
    finally:
        shutil.rmtree(remote, ignore_errors=True)


def test_all_end_to_end(env):
    """msprof collect -m fixtures/board/main --config board.ini --all; the remote work dir is cleaned up."""
    if not (FIXTURE_BOARD / "main").exists():
        pytest.skip("fixtures/board/main (the board simulator) is not in the tree yet")
    main = env.project(FIXTURE_BOARD)
    before = set(env.user["home"].glob("msprof-*"))
    proc = env.collect("-m", main, "--all")
    assert proc.returncode == 0, proc.err
    job = single_job(env.output)
    assert "results of" in proc.err
    produced = [p for p in job.rglob("*") if p.is_file() and p.parent.name in ("summary", "timeline")]
    assert produced, "no summary/timeline files after --all"
    assert set(env.user["home"].glob("msprof-*")) == before, "remote work dir not cleaned up"


def test_a_given_work_dir_keeps_the_jobs_an_earlier_run_left(env):
    """--remote-dir naming a work dir where an earlier --keep-remote run left a JOB: this run pulls and removes
    its own JOB only; the earlier one stays on the board (it was never pulled by this run) and is said."""
    main = env.project(sim={"exit_code": 0})
    remote = env.remote_dir("msprof-reused")
    old = remote / "msprof_output" / "JOBOLDXXXX"
    old.mkdir(parents=True)
    (old / "f").write_text("earlier\n")
    subprocess.run(["chown", "-R", f"{env.user['name']}:{env.user['name']}", str(remote)], check=True)
    try:
        proc = env.collect("-m", main, "--remote-dir", "msprof-reused")
        assert proc.returncode == 0, proc.err
        [job] = local_jobs(env.output)
        assert job != "JOBOLDXXXX"
        assert sorted(p.name for p in (remote / "msprof_output").iterdir()) == ["JOBOLDXXXX"]
        assert (old / "f").read_text() == "earlier\n"
        assert "kept 1 earlier JOB directory in 127.0.0.1:" in proc.err
    finally:
        shutil.rmtree(remote, ignore_errors=True)


def test_key_auth_default_remote_dir_cleaned(env):
    main = env.project(sim={"exit_code": 0})
    env.write_ini(pwd=None, key_file=env.sshd.client_key)
    before = set(env.user["home"].glob("msprof-*"))
    proc = env.collect("-m", main)
    assert proc.returncode == 0, proc.err
    job = single_job(env.output)
    assert (job / "info.json.0").exists() and (job / "collect.json").exists()
    assert "stub: start" in proc.out and "stub: to stderr" in proc.err  # main's streams, separately
    assert set(env.user["home"].glob("msprof-*")) == before


def test_env_password_and_sftp_pull(env):
    """MSPROF_SSH_PASSWORD, and the SFTP walk instead of tar (ini transfer = sftp)."""
    main = env.project(sim={"write_bytes": 300000})
    env.write_ini(pwd=None, transfer="sftp")
    proc = env.collect("-m", main, "--keep-remote", "--remote-dir", "msprof-sftp",
                       env={"MSPROF_SSH_PASSWORD": env.user["password"]})
    remote = env.remote_dir("msprof-sftp")
    try:
        assert proc.returncode == 0, proc.err
        job = single_job(env.output)
        [board_job] = remote_jobs(remote)
        assert tree_digest(job) == tree_digest(board_job)
        assert json.loads((job / "collect.json").read_text())["transfer"] == "sftp"
        # pulling the same work dir again: the identical local JOB is skipped, a different one refused —
        # also one whose files have the board's sizes (compared byte for byte: a second run of an app writes a
        # JOB of the same name and sizes, and was skipped as "identical": found by a newcomer's trial)
        again = env.collect("--resume", "--remote-dir", "msprof-sftp", "--keep-remote",
                            env={"MSPROF_SSH_PASSWORD": env.user["password"]})
        assert again.returncode == 0 and "(the same bytes); not pulled again" in again.err, again.err
        victim = next(p for p in job.rglob("*.slice_*"))
        flipped = bytearray(victim.read_bytes())
        flipped[-1] ^= 0xFF
        victim.write_bytes(bytes(flipped))
        again = env.collect("--resume", "--remote-dir", "msprof-sftp", "--keep-remote",
                            env={"MSPROF_SSH_PASSWORD": env.user["password"]})
        assert again.returncode == 2 and "already exists and differs" in again.err, again.err
        assert victim.read_bytes() == bytes(flipped) and not (env.output / ".partial" / job.name).exists()
        victim.write_bytes(victim.read_bytes() + b"x")
        again = env.collect("--resume", "--remote-dir", "msprof-sftp", "--keep-remote",
                            env={"MSPROF_SSH_PASSWORD": env.user["password"]})
        assert again.returncode == 2 and "not overwritten" in again.err, again.err
        assert victim.read_bytes().endswith(b"x")
    finally:
        shutil.rmtree(remote, ignore_errors=True)


# -- host keys, auth, network -------------------------------------------------------------------------
def _fingerprint(pub: Path) -> str:
    out = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", str(pub)], capture_output=True, text=True,
                         check=True).stdout
    return out.split()[1]


def test_unknown_host_refused_then_accepted(env):
    main = env.project()
    env.write_ini(known_hosts=None)  # only ~/.ssh/known_hosts, which does not exist in the fresh HOME
    proc = env.collect("-m", main, "--switch", "off")
    assert proc.returncode == 3, proc.err
    assert _fingerprint(env.sshd.host_key.with_suffix(".pub")) in proc.err
    assert "--accept-new-host-key" in proc.err and "Traceback" not in proc.err
    assert not env.output.exists()                  # nothing pulled: no empty --output left behind
    proc = env.collect("-m", main, "--switch", "off", "--accept-new-host-key")
    assert proc.returncode == 0, proc.err
    known = (env.home / ".ssh" / "known_hosts").read_text()
    assert known.startswith(f"[127.0.0.1]:{env.sshd.port} ssh-ed25519 ")
    proc = env.collect("-m", main, "--switch", "off")  # now known: no flag needed
    assert proc.returncode == 0, proc.err


def test_changed_host_key_refused(env, tmp_path):
    other = sshd_harness.keygen(tmp_path / "other_key")
    kind, b64 = other.with_suffix(".pub").read_text().split()[:2]
    known = tmp_path / "known_hosts"
    known.write_text(f"# board\n[127.0.0.1]:{env.sshd.port} {kind} {b64}\n")
    env.write_ini(known_hosts=known)
    main = env.project()
    for extra in ([], ["--accept-new-host-key"]):
        proc = env.collect("-m", main, "--switch", "off", *extra)
        assert proc.returncode == 3, proc.err
        assert "CHANGED" in proc.err and f"{known}:2" in proc.err and "reflashed" in proc.err
    assert known.read_text().count("\n") == 2  # never auto-accepted
    # the advice, pasted, removes the old line from the file that holds it (not from ~/.ssh/known_hosts)
    advice = proc.err.split("(or run ", 1)[1].split("), then rerun", 1)[0]
    subprocess.run(shlex.split(advice), check=True, capture_output=True)
    assert known.read_text() == "# board\n"


# known_hosts as OpenSSH reads it (issue 10 #8). Each case is judged twice, by OpenSSH's own ssh client and by
# msprof collect, both in accept-new mode on a copy of the file, and both must give the verdict written here
# (checked against ssh(1)/sshd(8): patterns, negation, markers, several lines, skipped bad lines).
#   known: connects, file unchanged; added: connects and appends the key; changed / revoked: refuses.
def _host_key_cases(sshd, other_pub: Path, rsa_pub: Path):
    entry = f"[127.0.0.1]:{sshd.port}"
    good = " ".join(sshd.host_key.with_suffix(".pub").read_text().split()[:2])
    kind, good64 = good.split()
    other = " ".join(other_pub.read_text().split()[:2])
    rsa = " ".join(rsa_pub.read_text().split()[:2])
    return {
        "exact": (f"{entry} {good}", "known"),
        "star_other_key": (f"* {other}", "changed"),
        "bracket_port_glob": (f"[127.0.0.1]:* {other}", "changed"),
        "question_mark": (f"[127.0.0.?]:{sshd.port} {other}", "changed"),
        "port22_name_only": (f"127.0.0.* {other}", "added"),  # not [host]:port: another name
        "negated_here": (f"*,!{entry} {other}", "added"),
        "negated_elsewhere": (f"!10.0.0.1,* {other}", "changed"),
        "several_lines_second_matches": (f"{entry} {other}\n{entry} {good}", "known"),
        "several_lines_first_matches": (f"{entry} {good}\n* {other}", "known"),
        "other_key_type": (f"{entry} {rsa}", "changed"),
        "revoked": (f"@revoked * {good}\n{entry} {good}", "revoked"),
        "revoked_for_another_host": (f"@revoked 10.1.1.1 {good}\n{entry} {good}", "known"),
        "cert_authority_ignored": (f"@cert-authority * {other}", "added"),
        "bad_base64_ignored": (f"{entry} {kind} !!!not-base64!!!", "added"),
        "bad_base64_then_exact": (f"{entry} {kind} AAAA!!\n{entry} {good}", "known"),
        "type_field_mismatch_ignored": (f"{entry} ssh-rsa {good64}", "added"),
        "unknown_marker_ignored": (f"@bogus {entry} {other}", "added"),
        "comment_and_blank_lines": (f"# {entry} {other}\n\n   {entry} {good} board", "known"),
    }


def _openssh_verdict(sshd, user, known: Path) -> str:
    before = known.read_text()
    proc = subprocess.run(
        ["ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
         "-o", f"UserKnownHostsFile={known}", "-o", "GlobalKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=accept-new", "-o", "ConnectTimeout=10",
         "-i", str(sshd.client_key), "-p", str(sshd.port), f"{user}@127.0.0.1", "true"],
        capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    if proc.returncode == 0:
        return "known" if known.read_text() == before else "added"
    if "REVOKED HOST KEY" in proc.stderr:
        return "revoked"
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in proc.stderr:
        return "changed"
    return f"ssh exit {proc.returncode}: {proc.stderr.strip()[-300:]}"


def _msprof_verdict(env, main, known: Path) -> str:
    before = known.read_text()
    env.write_ini(known_hosts=known)
    proc = env.collect("-m", main, "--switch", "off", "--accept-new-host-key", timeout=60)
    if proc.returncode == 0:
        return "known" if known.read_text() == before else "added"
    assert "Traceback" not in proc.err
    if proc.returncode == 3 and "@revoked" in proc.err and "Not connecting" in proc.err:
        return "revoked"
    if proc.returncode == 3 and "has CHANGED" in proc.err and known.read_text() == before:
        return "changed"
    return f"msprof exit {proc.returncode}: {proc.err.strip()[-300:]}"


def test_known_hosts_like_openssh(env, tmp_path):
    other = sshd_harness.keygen(tmp_path / "other_key").with_suffix(".pub")
    rsa = tmp_path / "rsa_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "rsa", "-b", "2048", "-N", "", "-f", str(rsa)], check=True)
    main = env.project()
    have_ssh = shutil.which("ssh") is not None
    results = {}
    for name, (text, expected) in _host_key_cases(env.sshd, other, rsa.with_suffix(".pub")).items():
        got = {"expected": expected}
        if have_ssh:
            (tmp_path / f"ssh_{name}").write_text(text + "\n")
            got["openssh"] = _openssh_verdict(env.sshd, env.user["name"], tmp_path / f"ssh_{name}")
        (tmp_path / f"msprof_{name}").write_text(text + "\n")
        got["msprof"] = _msprof_verdict(env, main, tmp_path / f"msprof_{name}")
        results[name] = got
    wrong = {name: got for name, got in results.items() if len(set(got.values())) != 1}
    assert not wrong, wrong
    if not have_ssh:
        print("ssh (openssh-client) not installed: verdicts checked against the table only")


def test_known_hosts_hashed_names(env, tmp_path):
    """Hashed names written by ssh-keygen -H (not by us) keep working, for the right key and against another."""
    other = sshd_harness.keygen(tmp_path / "other_key").with_suffix(".pub")
    main = env.project()
    for key_line, expected in ((" ".join(env.sshd.host_key.with_suffix(".pub").read_text().split()[:2]), "known"),
                               (" ".join(other.read_text().split()[:2]), "changed")):
        known = tmp_path / f"known_{expected}"
        known.write_text(f"[127.0.0.1]:{env.sshd.port} {key_line}\n")
        subprocess.run(["ssh-keygen", "-q", "-H", "-f", str(known)], check=True, capture_output=True)
        assert known.read_text().startswith("|1|")
        assert _msprof_verdict(env, main, known) == expected


def test_wrong_password(env):
    wrong = "Wr0ng-" + env.user["password"][::-1]
    env.secrets.append(wrong)
    env.write_ini(pwd=wrong)
    proc = env.collect("-m", env.project())
    assert proc.returncode == 3
    assert "authentication failed" in proc.err and len(proc.err.strip().splitlines()) == 1


def test_closed_port(env):
    env.write_ini(port=sshd_harness.free_port())
    proc = env.collect("-m", env.project())
    assert proc.returncode == 3
    assert "connection refused" in proc.err and len(proc.err.strip().splitlines()) == 1


def test_bad_ini_names_key(env):
    env.write_ini(port="22x")
    proc = env.collect("-m", env.project())
    assert proc.returncode == 5 and "'port'" in proc.err


# -- what is uploaded (issue 10 #2, issue 13 #9) -----------------------------------------------------------
def _remote_tree(remote: Path):
    return {p.relative_to(remote).as_posix(): p.read_bytes() for p in remote.rglob("*") if p.is_file()}


def test_secrets_never_uploaded(env):
    """The ini and its key_file (beside main, as the docs suggest), links to them, a link to ~/.ssh/id_rsa and
    a link out of the project are left behind and named on stderr; links inside the project are uploaded."""
    main = env.project()
    project = main.parent
    (project / "model").mkdir()
    (project / "model" / "net.om").write_bytes(b"model bytes")
    (project / "keys").mkdir()
    key = project / "keys" / "id_board"
    shutil.copy(env.sshd.client_key, key)
    os.chmod(key, 0o600)
    stolen = env.home / ".ssh" / "id_rsa"
    stolen.parent.mkdir()
    stolen.write_bytes(b"-----BEGIN OPENSSH PRIVATE KEY----- not for the board\n")
    outside = env.tmp / "notes.txt"
    outside.write_bytes(b"private notes outside the project\n")
    (project / "id_rsa").symlink_to(stolen)
    (project / "notes").symlink_to(outside)
    (project / "evil\x1b[31mname").symlink_to(stolen)
    (project / "key_again").symlink_to("keys/id_board")
    (project / "net.om").symlink_to("model/net.om")
    env.ini = project / "board.ini"
    env.write_ini(key_file="keys/id_board")
    (project / "ini_again").symlink_to("board.ini")
    proc = env.collect("-m", main, "--switch", "off", "--keep-remote", "--remote-dir", "msprof-secrets")
    remote = env.remote_dir("msprof-secrets")
    try:
        assert proc.returncode == 0, proc.err
        uploaded = _remote_tree(remote)
        assert set(uploaded) == {"main", "acl.json", "model/net.om", "net.om"}, sorted(uploaded)
        assert uploaded["net.om"] == b"model bytes"
        everything = b"".join(uploaded.values())
        for secret in (key.read_bytes(), stolen.read_bytes(), outside.read_bytes(), env.user["password"].encode()):
            assert secret not in everything
        for line in ("not uploading board.ini: the --config file", "not uploading ini_again: the --config file",
                     "not uploading keys/id_board: the key_file", "not uploading key_again: the key_file",
                     "not uploading id_rsa: a symbolic link that leads outside the project",
                     "not uploading notes: a symbolic link that leads outside the project",
                     "not uploading evil\\x1b[31mname: a symbolic link that leads outside the project"):
            assert line in proc.err, proc.err
        assert "\x1b" not in proc.err and b"not for the board" not in proc.stderr
    finally:
        shutil.rmtree(remote, ignore_errors=True)


def _accepted_logins(env) -> int:
    return env.sshd.log_path.read_text(errors="replace").count(f"Accepted password for {env.user['name']} ")


def test_system_directory_refused_after_connecting(env):
    """collect -m /bin/true: connects (the sshd log shows the login), then refuses to upload /usr/bin; nothing
    is created on the board. --force is named."""
    before_logins = _accepted_logins(env)
    before = set(env.user["home"].iterdir())
    proc = env.collect("-m", "/bin/true")
    assert proc.returncode == 2, proc.err
    project = Path("/bin/true").resolve().parent
    assert f"refusing to upload {project}: it is a system or home directory" in proc.err
    assert "--force" in proc.err and "Traceback" not in proc.err
    assert _accepted_logins(env) == before_logins + 1
    assert set(env.user["home"].iterdir()) == before


def test_home_directory_refused(env):
    main = env.home / "main"
    main.write_text("#!/bin/sh\n")
    os.chmod(main, 0o755)
    proc = env.collect("-m", main)
    assert proc.returncode == 2, proc.err
    assert f"refusing to upload {env.home.resolve()}: it is a system or home directory" in proc.err


def test_connects_before_walking_the_project(env):
    """A closed port is reported before the project is looked at (before: the walk ran first and warned about
    the symlinked directory, then the connection failed)."""
    main = env.project()
    (main.parent / "linked").symlink_to(env.tmp)
    env.write_ini(port=sshd_harness.free_port())
    proc = env.collect("-m", main)
    assert proc.returncode == 3, proc.err
    assert "connection refused" in proc.err and "not uploading" not in proc.err


def test_too_many_files_refused_counting_stops(env):
    """10,001 entries: refused with the count; the walk stops at the limit, so the 64 GiB (sparse) file in a
    subdirectory is never counted (counting it would have said 'more than 512 MiB' instead)."""
    main = env.project()
    many = main.parent
    for i in range(10_001):
        (many / f"f{i:05d}").write_bytes(b"x")
    (many / "zz").mkdir()
    with open(many / "zz" / "huge.bin", "wb") as handle:
        handle.truncate(64 << 30)
    started = time.monotonic()
    proc = env.collect("-m", main)
    assert proc.returncode == 2, proc.err
    assert f"refusing to upload {many}: more than 10,000 files and directories" in proc.err, proc.err
    assert "0.0 MiB in the first 10,000)" in proc.err and "--force" in proc.err
    assert time.monotonic() - started < 30


def test_too_large_project_refused(env):
    main = env.project()
    with open(main.parent / "weights.bin", "wb") as handle:
        handle.truncate(600 << 20)  # sparse
    proc = env.collect("-m", main)
    assert proc.returncode == 2, proc.err
    size = (600 << 20) + main.stat().st_size
    assert f"more than 512.0 MiB ({size / 1048576:.1f} MiB in 2 files" in proc.err, proc.err


# -- a hostile board (issue 10 #7, #12, #13) ----------------------------------------------------------------
HOSTILE_MAIN = """#!/usr/bin/env python3
import json, os
OUT = os.fsencode(json.load(open("acl.json"))["profiler"]["output"])

def job(name, files=(b"info.json.0", b"data/hwts.data.0.slice_0")):
    root = os.path.join(OUT, name)
    for rel in files:
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        with open(os.path.join(root, rel), "wb") as f:
            f.write(b"{}" if rel.endswith(b".json.0") else os.urandom(64))
    return root

"""


def hostile_project(env, body: str, source: Path = STUB_BOARD) -> Path:
    """A project whose main runs ``body`` (Python, with job() and OUT in scope) on the board."""
    main = env.project(source)
    if source != STUB_BOARD:
        os.rename(main, main.parent / "main_sim")
    main.write_text(HOSTILE_MAIN + body)
    os.chmod(main, 0o755)
    return main


def local_jobs(output: Path):
    return sorted(p.name for p in output.iterdir() if p.name.startswith("JOB")) if output.exists() else []


def test_board_job_name_outside_safe_set_refused(env):
    """A JOB named with shell syntax is not pulled (exit 4, named); the good JOB is pulled; nothing runs."""
    main = hostile_project(env, 'job(b"JOB$(touch PWNED)x")\njob(b"JOBGOOD1")\n')
    proc = env.collect("-m", main, "--remote-dir", "msprof-names")
    remote = env.remote_dir("msprof-names")
    try:
        assert proc.returncode == 4, proc.err
        assert "the board wrote a JOB directory named 'JOB$(touch PWNED)x': only letters, digits" in proc.err
        assert local_jobs(env.output) == ["JOBGOOD1"]
        assert proc.out.splitlines() == [str(env.output / "JOBGOOD1")]
        assert (remote / "msprof_output" / "JOB$(touch PWNED)x").is_dir()  # left on the board, not lost
        assert not list(env.tmp.rglob("PWNED")) and not list(remote.rglob("PWNED"))
        assert "Traceback" not in proc.err
    finally:
        shutil.rmtree(remote, ignore_errors=True)


def test_board_file_name_not_utf8(env):
    """exit 4 (not 1), the name with its bad byte escaped; the JOB stays on the board."""
    main = hostile_project(env, 'job(b"JOBBAD1", files=(b"info.json.0", b"data/bad\\xffname.0"))\n')
    proc = env.collect("-m", main, "--remote-dir", "msprof-utf8")
    remote = env.remote_dir("msprof-utf8")
    try:
        assert proc.returncode == 4, proc.err
        assert "is not UTF-8" in proc.err and "'bad\\xffname.0'" in proc.err, proc.err
        assert "Traceback" not in proc.err and "internal error" not in proc.err
        assert local_jobs(env.output) == []
        assert (remote / "msprof_output" / "JOBBAD1").is_dir()
    finally:
        shutil.rmtree(remote, ignore_errors=True)


LATE_BODY = """import time
job(b"JOBLATE1")
if os.fork() == 0:  # the child keeps main's stdout open after main has exited
    time.sleep(%s)
    os.write(1, b"written after main exited\\n")
    os._exit(0)
"""


def test_output_written_after_main_exits_is_kept(env):
    """sshd reports main's exit before what its pipes still hold: a line a child writes after that is shown,
    not cut off."""
    main = hostile_project(env, LATE_BODY % 0.5)
    proc = env.collect("-m", main, "--remote-dir", "msprof-late")
    assert proc.returncode == 0, proc.err
    assert proc.out.splitlines() == ["written after main exited", str(env.output / "JOBLATE1")]


def test_child_left_running_does_not_hold_collect(env):
    """A daemon that main leaves behind with its stdout open does not keep collect waiting for it."""
    main = hostile_project(env, LATE_BODY % 20)
    began = time.monotonic()
    try:
        proc = env.collect("-m", main, "--remote-dir", "msprof-daemon")
        assert proc.returncode == 0, proc.err
        assert time.monotonic() - began < 15
        assert proc.out.splitlines() == [str(env.output / "JOBLATE1")]
    finally:  # the daemon, which later tests would take for a survivor of theirs
        for pid in user_processes(env.user["uid"]):
            with contextlib.suppress(OSError):
                if "/msprof-daemon" in os.readlink(f"/proc/{pid}/cwd"):  # (" (deleted)" once cleaned up)
                    os.kill(pid, signal.SIGKILL)


DEEP_BODY = """root = job(b"JOBDEEP1")
fd = os.open(root, os.O_RDONLY)
for _ in range(22):  # 22 levels of 200 bytes: deeper than PATH_MAX (4096), made with relative opens
    os.mkdir(b"d" * 200, dir_fd=fd)
    deeper = os.open(b"d" * 200, os.O_RDONLY, dir_fd=fd)
    os.close(fd)
    fd = deeper
leaf = os.open(b"deep.bin", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
os.write(leaf, b"x" * 100)
job(b"JOBGOOD2")
"""


def test_sftp_pull_notices_subtree_it_cannot_list(env):
    """OpenSSH's sftp-server silently leaves out entries deeper than PATH_MAX. The pull compares its listing
    with the board's find: exit 4 naming what is missing, the other JOB pulled, never success."""
    main = hostile_project(env, DEEP_BODY)
    env.write_ini(transfer="sftp")
    # the remote paths longer than the local ones, so that the local side is not the first to hit PATH_MAX
    name = "msprof-deep-" + "x" * (len(str(env.output)) + 40)
    proc = env.collect("-m", main, "--remote-dir", name)
    remote = env.remote_dir(name)
    try:
        assert proc.returncode == 4, proc.err
        assert "JOBDEEP1 is incomplete over SFTP" in proc.err and "were not listed by its SFTP server" in proc.err
        assert "JOBDEEP1/" + "d" * 60 in proc.err and "Traceback" not in proc.err
        assert local_jobs(env.output) == ["JOBGOOD2"], proc.err   # (flaky under load: the message says why)
    finally:
        subprocess.run(["rm", "-rf", "--", str(remote)], check=False)  # too deep for shutil.rmtree's paths


def board_command(env, name: str, script: str) -> Path:
    """A directory in the board user's home holding a shell script ``name`` (for the ini's remote_path)."""
    fakebin = env.user["home"] / f"fakebin-{name}"
    fakebin.mkdir(exist_ok=True)
    (fakebin / name).write_text(f"#!/bin/sh\n{script}\n")
    os.chmod(fakebin / name, 0o755)
    entry = pwd.getpwnam(env.user["name"])
    for path in (fakebin, fakebin / name):
        os.chown(path, entry.pw_uid, entry.pw_gid)
    return fakebin


@pytest.mark.parametrize("script, code, text", [
    # a busybox-like find that cannot descend somewhere: the JOB is not pulled
    ('echo "$1"; echo "find: $1/data: File name too long" >&2; exit 1', 4,
     "the board cannot list all of JOBFIND1 (find exit 1: find: JOBFIND1/data: File name too long); not pulled"),
    # no find at all: the SFTP listing is used alone (and said with -v)
    ("exit 127", 0, "no find on the board: the SFTP listing of JOBFIND1 is not cross-checked"),
])
def test_board_find_failing_or_missing(env, script, code, text):
    fakebin = board_command(env, "find", script)
    env.write_ini(remote_path=fakebin, transfer="sftp")
    main = hostile_project(env, 'job(b"JOBFIND1")\n')
    try:
        proc = env.collect("-m", main, verbose=True)
    finally:
        shutil.rmtree(fakebin, ignore_errors=True)
    assert proc.returncode == code, proc.err
    assert text in proc.err
    assert local_jobs(env.output) == ([] if code else ["JOBFIND1"])


def test_board_tar_failing_is_named_with_its_words(env):
    """A tar that sends its stream and then fails (a file changed as it read it): the JOB is not pulled, and
    the error gives tar's own last line, also when it comes after tar's exit status (the stream is read to
    the channel's end first)."""
    # (its words from a child, after its exit: what sshd may do with a tar's own last line)
    fakebin = board_command(env, "tar", '/bin/tar "$@"\n'
                            '(sleep 0.3; echo "tar: JOBTAR1/data: file changed as we read it" >&2) &\nexit 1')
    env.write_ini(remote_path=fakebin, transfer="tar")
    main = hostile_project(env, 'job(b"JOBTAR1")\n')
    try:
        proc = env.collect("-m", main)
    finally:
        shutil.rmtree(fakebin, ignore_errors=True)
    assert proc.returncode == 4, proc.err
    assert ("tar on the board failed while sending JOBTAR1: tar: JOBTAR1/data: file changed as we read it"
            in proc.err), proc.err
    assert local_jobs(env.output) == []


def test_all_analyses_every_job_then_worst_exit(env):
    """--all: the first JOB (sorted) is broken; the second is still analysed; exit 8 (the analysis code)."""
    body = ('import subprocess\nsubprocess.run(["./main_sim"], check=True)\n'
            'job(b"JOBAAAABROKEN", files=(b"info.json.0",))\n')
    main = hostile_project(env, body, source=FIXTURE_BOARD)
    proc = env.collect("-m", main, "--all")
    assert proc.returncode == 8, proc.err
    jobs = local_jobs(env.output)
    assert len(jobs) == 2 and jobs[0] == "JOBAAAABROKEN", jobs
    good = env.output / jobs[1]
    assert list((good / "summary").glob("op_summary*")), "the JOB after the broken one was not analysed"
    assert "analysis of JOBAAAABROKEN failed" in proc.err
    assert "analysis failed for JOBAAAABROKEN (see above; the other 1 JOB was analysed)" in proc.err


def test_printed_hint_is_quoted(env):
    """The 'analyse with' hint pastes into a shell as one -dir argument, even with a space in --output."""
    main = env.project()
    env.output = env.tmp / "out dir"
    proc = env.collect("-m", main)
    assert proc.returncode == 0, proc.err
    [line] = [ln for ln in proc.err.splitlines() if "analyse with:" in ln]
    command = line.split("analyse with: ", 1)[1].split(" (or rerun", 1)[0]
    argv = shlex.split(command)
    assert argv[:4] == ["msprof", "export", "summary", "-dir"] and len(argv) == 5, argv
    assert argv[4] == str(single_job(env.output))


# -- main misbehaving ----------------------------------------------------------------------------------
def test_main_fails_data_still_pulled(env):
    main = env.project(sim={"exit_code": 3})
    proc = env.collect("-m", main)
    assert proc.returncode == 4, proc.err
    assert "exited with status 3" in proc.err
    assert (single_job(env.output) / "info.json.0").exists()


def test_main_fails_all_still_analyses_what_it_wrote(env):
    """main wrote a JOB, then failed: the JOB is pulled, listed on stdout and, with --all, analysed; the exit
    is main's failure (4) all the same."""
    body = 'import subprocess, sys\nsubprocess.run(["./main_sim"], check=True)\nsys.exit(3)\n'
    main = hostile_project(env, body, source=FIXTURE_BOARD)
    proc = env.collect("-m", main, "--all")
    assert proc.returncode == 4, proc.err
    job = single_job(env.output)
    assert str(job) in proc.out and "exited with status 3" in proc.err
    assert list((job / "summary").glob("op_summary*")) and list((job / "timeline").glob("*.json"))
    plain = env.collect("-m", main)
    assert plain.returncode == 4 and "analyse with: msprof export summary -dir" in plain.err, plain.err


def test_main_not_executable(env):
    main = env.project()
    os.chmod(main, 0o644)
    proc = env.collect("-m", main)
    assert proc.returncode == 4, proc.err
    assert "exit 126" in proc.err and "Traceback" not in proc.err


def test_timeout_kills_process_group(env):
    main = env.project(sim={"sleep": 60})
    started = time.monotonic()
    proc = env.collect("-m", main, "--timeout", "1")
    assert proc.returncode == 4, proc.err
    assert "did not finish within 1 s" in proc.err
    assert time.monotonic() - started < 20
    assert (single_job(env.output) / "info.json.0").exists()  # what it wrote is still pulled
    deadline = time.monotonic() + 5
    while user_processes(env.user["uid"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not user_processes(env.user["uid"]), "the remote main survived the timeout"


# -- board disk full -----------------------------------------------------------------------------------
def test_board_disk_full_before_upload(env, tmpfs):
    point = tmpfs("size=256k,mode=0777")
    main = env.project()
    (main.parent / "model.om").write_bytes(os.urandom(1024 * 1024))
    proc = env.collect("-m", main, "--remote-dir", point)
    assert proc.returncode == 6, proc.err
    assert "not enough space on the board" in proc.err


def test_board_disk_full_during_upload(env, tmpfs):
    """Free bytes look fine but the inodes run out mid-upload: SFTP says 'Failure', the probe says ENOSPC."""
    point = tmpfs("size=64m,nr_inodes=6,mode=0777")
    main = env.project()
    for i in range(10):
        (main.parent / f"layer{i}.bin").write_bytes(b"x" * 100)
    proc = env.collect("-m", main, "--remote-dir", point)
    assert proc.returncode == 6, proc.err
    assert "no space left on the board" in proc.err and "Traceback" not in proc.err


# -- connection cut during the pull, then --resume ----------------------------------------------------
def collect_cut_while_pulling(env, main: Path, big: str):
    """Run collect and cut every SSH connection once the local copy of ``big`` (a glob under .partial) holds
    2 MB: (process, stdout, stderr text, whether a connection was cut)."""
    cmd = [sys.executable, "-m", "msprof", "collect", "--config", str(env.ini), "--output", str(env.output),
           "-m", str(main)]
    proc = subprocess.Popen(cmd, cwd=env.tmp, env=env.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    partial = env.output / ".partial"
    killed = False
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        found = list(partial.glob(big)) if partial.exists() else []
        if found and found[0].stat().st_size > 2 * 1024 * 1024:
            killed = env.sshd.kill_sessions() > 0
            break
        time.sleep(0.005)
    out, err = proc.communicate(timeout=60)
    return proc, out, err.decode(), killed


def test_connection_cut_during_pull_then_resume(env):
    main = env.project(sim={"write_bytes": 96 * 1024 * 1024})
    proc, out, err, killed = collect_cut_while_pulling(env, main, "JOB*/data/big.data.0.slice_0")
    partial = env.output / ".partial"
    for secret in env.secrets:
        assert secret.encode() not in out + err.encode()
    assert killed, f"the pull finished before it could be cut: {err}"
    assert proc.returncode == 4, err
    assert "--resume" in err and "Traceback" not in err
    print(err)
    assert not [p for p in env.output.iterdir() if p.name.startswith("JOB")], "a partial JOB was renamed"
    state = json.loads((partial / "collect-state.json").read_text())
    [board_job] = remote_jobs(Path(state["remote_dir"]))
    expected = tree_digest(board_job)

    proc = env.collect("--resume")
    assert proc.returncode == 0, proc.err
    job = single_job(env.output)
    assert tree_digest(job) == expected
    assert not partial.exists()
    assert not Path(state["remote_dir"]).exists(), "remote work dir not cleaned up after the resumed pull"

    # a second resume finds nothing to do; an existing JOB is never overwritten
    proc = env.collect("--resume")
    assert proc.returncode == 2 and "nothing to resume" in proc.err


def test_resume_does_not_pull_again_what_the_run_pulled(env):
    """Two JOBs, the connection cut while the second is downloading: the resume pulls the second only (the
    first, in the output with this run's collect.json, is not downloaded again), and both are the board's."""
    main = hostile_project(env, 'job(b"JOBA1")\nbig = job(b"JOBB2")\n'
                                'with open(os.path.join(big, b"data/big.data.0.slice_0"), "wb") as f:\n'
                                '    f.write(os.urandom(96 * 1024 * 1024))\n')
    proc, _out, err, killed = collect_cut_while_pulling(env, main, "JOBB2/data/big.data.0.slice_0")
    partial = env.output / ".partial"
    assert killed, f"the pull finished before it could be cut: {err}"
    assert proc.returncode == 4 and local_jobs(env.output) == ["JOBA1"], err
    first = (env.output / "JOBA1" / "collect.json").read_bytes()
    state = json.loads((partial / "collect-state.json").read_text())
    expected = {job.name: tree_digest(job) for job in remote_jobs(Path(state["remote_dir"]))}

    proc = env.collect("--resume", verbose=True)
    assert proc.returncode == 0, proc.err
    assert "msprof: JOBA1 was pulled before the interruption; not pulled again" in proc.err
    assert "pulling JOBA1" not in proc.err and "pulling JOBB2" in proc.err
    assert (env.output / "JOBA1" / "collect.json").read_bytes() == first
    assert {job: tree_digest(env.output / job) for job in local_jobs(env.output)} == expected


# -- --nfs ---------------------------------------------------------------------------------------------
def test_nfs_issues_mount(env):
    """The board's mount is a test double on the PATH given by the ini's remote_path."""
    user = env.user
    fakebin = user["home"] / "fakebin"
    fakebin.mkdir(exist_ok=True)
    record = user["home"] / "mount.argv"
    for tool in ("mount", "umount"):
        script = fakebin / tool
        script.write_text(f'#!/bin/sh\necho "{tool} $*" >> {record}\n')
        os.chmod(script, 0o755)
    entry = pwd.getpwnam(user["name"])
    for path in (fakebin, *fakebin.iterdir()):
        os.chown(path, entry.pw_uid, entry.pw_gid)
    if record.exists():
        record.unlink()
    env.write_ini(remote_path=fakebin)
    main = env.project()
    proc = env.collect("-m", main, "--nfs", ":/srv/nfs/prof", "--remote-dir", "msprof-nfs")
    remote = env.remote_dir("msprof-nfs")
    try:
        assert proc.returncode == 0, proc.err
        lines = record.read_text().splitlines()
        assert lines[0] == f"mount -t nfs -o nolock,tcp 127.0.0.1:/srv/nfs/prof {remote}/msprof_output"
        assert lines[1] == f"umount {remote}/msprof_output"
        single_job(env.output)
    finally:
        shutil.rmtree(remote, ignore_errors=True)
        shutil.rmtree(fakebin, ignore_errors=True)


def test_silent_listener_times_out(env):
    """A port that accepts but never sends an SSH banner: exit 3 after the ini timeout, one line."""
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        env.write_ini(port=listener.getsockname()[1], timeout=1)
        started = time.monotonic()
        proc = env.collect("-m", env.project())
    assert proc.returncode == 3, proc.err
    assert "no SSH server answered" in proc.err and len(proc.err.strip().splitlines()) == 1
    assert time.monotonic() - started < 10


def test_an_unwritable_output_is_refused_before_anything_is_uploaded(env):
    """--output naming a file (or a directory the user may not write) is exit 7 before the upload; it was an
    internal error after the upload, leaving a work dir on the board each time (found by a newcomer's trial)."""
    main = env.project()
    before = set(env.user["home"].glob("msprof-*"))
    env.output.parent.mkdir(parents=True, exist_ok=True)
    env.output.write_text("a file\n")
    proc = env.collect("-m", main)
    assert proc.returncode == 7, proc.err
    assert f"{env.output} exists and is not a directory" in proc.err and "internal error" not in proc.err
    assert set(env.user["home"].glob("msprof-*")) == before and env.output.read_text() == "a file\n"


def test_a_failing_main_is_exit_4_even_when_its_job_cannot_be_analysed(env):
    """main wrote a JOB its analysis cannot read, then failed: exit 4 (cli.md: main failed), not the analysis'
    8 (found by a newcomer's trial: a board disk full gave exit 8)."""
    main = hostile_project(env, 'job(b"JOBBROKEN")\nimport sys\nsys.exit(3)\n')
    proc = env.collect("-m", main, "--all")
    assert proc.returncode == 4, proc.err
    assert "exited with status 3" in proc.err and "analysis failed for JOBBROKEN (see above)" in proc.err
    assert "the other 0" not in proc.err


def test_resume_finishes_as_the_interrupted_run_would_have(env):
    """Ctrl-C while main runs: the printed resume command repeats --keep-remote and --all, and a plain
    --resume honours them from the record — the board's work dir is kept and the JOB analysed (found by a
    newcomer's trial: the resume deleted the work dir the run was told to keep)."""
    import signal

    main = env.project(FIXTURE_BOARD, sim={"sleep": 60})
    cmd = [sys.executable, "-m", "msprof", "collect", "--config", str(env.ini), "--output", str(env.output),
           "-m", str(main), "--keep-remote", "--all", "--remote-dir", "msprof-kept"]
    proc = subprocess.Popen(cmd, cwd=env.tmp, env=env.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    remote = env.remote_dir("msprof-kept")
    try:
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline and not remote_jobs_or_empty(remote):
            time.sleep(0.05)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
        err = err.decode()
        assert proc.returncode == 130, err
        assert (f"msprof collect --resume --config {env.ini} --output {env.output} --keep-remote --all") in err
        assert err.count("interrupted") == 1 and err.rstrip().endswith("msprof: interrupted"), err
        resumed = env.collect("--resume")
        assert resumed.returncode == 0, resumed.err
        job = single_job(env.output)
        assert (job / "sqlite" / "msprof.db").exists()          # analysed (--all, from the record)
        assert remote.is_dir() and "kept the remote work dir" in resumed.err
    finally:
        shutil.rmtree(remote, ignore_errors=True)


def remote_jobs_or_empty(remote: Path):
    return list((remote / "msprof_output").glob("JOB*")) if (remote / "msprof_output").is_dir() else []


def test_a_remote_dir_the_login_may_not_look_at_is_exit_4_naming_it(env):
    """--remote-dir under a directory the board login may not enter (root's home): exit 4 naming it, for a
    run and for a resume (it was an internal error: found by a newcomer's trial)."""
    locked = Path("/root")
    assert locked.stat().st_mode & 0o077 == 0
    main = env.project()
    proc = env.collect("-m", main, "--remote-dir", "/root/msprof-work")
    assert proc.returncode == 4, proc.err
    assert "cannot look at /root/msprof-work on the board: Permission denied" in proc.err, proc.err
    assert "internal error" not in proc.err
    proc = env.collect("--resume", "--remote-dir", "/root/msprof-work")
    assert proc.returncode == 4 and "cannot look at /root/msprof-work/msprof_output on the board" in proc.err, \
        proc.err


def test_no_credentials_and_an_encrypted_key_are_said(env):
    """Nothing to offer (no pwd, key_file, agent or default key): "authentication failed … set pwd or key_file"
    (it said "SSH handshake failed: No authentication methods available"). A key_file with a passphrase and
    nothing to open it: said, with where to give it; MSPROF_SSH_PASSWORD opens it; on a terminal the prompt asks
    for the passphrase and offers the key again (it asked for a password and dropped the key). (Found by a
    newcomer's trial.)"""
    import pty

    main = env.project()
    env.write_ini(pwd=None)
    proc = env.collect("-m", main, "--switch", "off")
    assert proc.returncode == 3, proc.err
    assert (f"authentication failed for {env.user['name']}@127.0.0.1:{env.sshd.port} (tried: SSH agent/default "
            "keys); set pwd or key_file in [ssh_config], or MSPROF_SSH_PASSWORD") in proc.err

    key = env.tmp / "id_pass"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "open sesame", "-C", "pp", "-f", str(key)],
                   check=True, stdout=subprocess.DEVNULL)
    sshd_harness.install_user_key(env.user["name"], key.with_suffix(".pub").read_text())
    try:
        env.write_ini(pwd=None, key_file=key)
        proc = env.collect("-m", main, "--switch", "off")
        assert proc.returncode == 3, proc.err
        assert (f"(tried: key_file); the key_file {key} is encrypted: run on a terminal to be asked its passphrase, "
                "or load it into an SSH agent") in proc.err
        proc = env.collect("-m", main, "--switch", "off", env={"MSPROF_SSH_PASSWORD": "open sesame"})
        assert proc.returncode == 0, proc.err
        # on a terminal: asked for the key's passphrase
        pid, fd = pty.fork()
        if pid == 0:
            os.chdir(env.tmp)
            os.execve(sys.executable, [sys.executable, "-m", "msprof", "collect", "--config", str(env.ini),
                                       "--output", str(env.output), "-m", str(main), "--switch", "off"], env.env)
        seen = b""
        answered = False
        while True:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
            if not answered and f"passphrase for {key}: ".encode() in seen:
                os.write(fd, b"open sesame\n")
                answered = True
        _, status = os.waitpid(pid, 0)
        assert answered and os.waitstatus_to_exitcode(status) == 0, seen.decode(errors="replace")
        assert b"open sesame" not in seen
    finally:
        sshd_harness.install_user_key(env.user["name"], env.sshd.client_key.with_suffix(".pub").read_text())


def test_a_run_that_pulls_nothing_leaves_no_empty_output(env):
    """main wrote no JOB (switch on: exit 4): the --output it made for the pull goes again (it was left empty;
    found by a newcomer's trial); an --output that was there stays."""
    main = hostile_project(env, "pass\n")
    assert not env.output.exists()
    proc = env.collect("-m", main)
    assert proc.returncode == 4 and "wrote no JOB directory" in proc.err, proc.err
    assert not env.output.exists()
    env.output.mkdir()
    proc = env.collect("-m", main)
    assert proc.returncode == 4 and env.output.is_dir()

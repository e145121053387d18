"""Unit tests of collect's pieces that need no board: ini, credentials, acl.json, options, names, tar safety."""
import base64
import io
import json
import logging
import os
import re
import subprocess
import sys
import stat
import tarfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from msprof.cli import cli
from msprof.collect import acljson, config
from msprof.collect.command import parse_nfs
from msprof.collect.session import resolve_remote_dir
from msprof.collect.project import walk
from msprof.collect.listing import Manifest, RemoteFile, local_state
from msprof.collect.names import check_name, check_relpath
from msprof.collect.pull import extract_tar, verify
from msprof.errors import ConfigError, RemoteError, UsageError

SECRET = "s3cret-%pass;word"


def write_ini(tmp_path, body, mode=0o600):
    path = tmp_path / "board.ini"
    path.write_text(body)
    os.chmod(path, mode)
    return path


def test_ini_full(tmp_path):
    key = tmp_path / "id"
    key.write_text("x")
    path = write_ini(tmp_path, f"[ssh_config]\nip = 192.168.1.10\nusername = root\npwd = {SECRET}\nport = 2222\n"
                               f"key_file = id\nknown_hosts = kh\ntimeout = 5\n")
    cfg = config.load_config(path)
    assert (cfg.host, cfg.username, cfg.port, cfg.password, cfg.timeout) == ("192.168.1.10", "root", 2222, SECRET, 5)
    assert cfg.key_file == key and cfg.known_hosts == tmp_path / "kh"
    assert SECRET not in repr(cfg)


def test_ini_defaults(tmp_path):
    cfg = config.load_config(write_ini(tmp_path, "[ssh_config]\nip=10.0.0.2\nusername=root\n"))
    assert cfg.port == 22 and cfg.password is None and cfg.transfer == "auto"


@pytest.mark.parametrize("body, key", [
    ("[ssh_config]\nusername=root\n", "'ip'"),
    ("[ssh_config]\nip=1.2.3.4\n", "'username'"),
    ("[ssh_config]\nip=1.2.3.4\nusername=root\nport=70000\n", "'port'"),
    ("[ssh_config]\nip=1.2.3.4\nusername=root\nport=abc\n", "'port'"),
    ("[ssh_config]\nip=1.2.3.4\nusername=root\nkey_file=/nonexistent/key\n", "'key_file'"),
    ("[ssh_config]\nip=1.2.3.4\nusername=root\ntransfer=rsync\n", "'transfer'"),
    ("[other]\nip=1.2.3.4\n", "[ssh_config]"),
    ("ip=1.2.3.4\n", "not a valid ini"),
])
def test_ini_errors_name_the_key(tmp_path, body, key):
    with pytest.raises(ConfigError) as info:
        config.load_config(write_ini(tmp_path, body))
    assert key in info.value.message and info.value.exit_code == 5


def test_ini_parse_error_does_not_echo_password(tmp_path):
    path = write_ini(tmp_path, f"[ssh_config]\nip=1.2.3.4\npwd={SECRET}\npwd={SECRET}\n")
    with pytest.raises(ConfigError) as info:
        config.load_config(path)
    assert SECRET not in info.value.message


@pytest.mark.parametrize("above", ["ip", "username", "port", "known_hosts", "key_file", "timeout"])
def test_an_indented_password_line_is_refused_without_its_value(tmp_path, above, captured):
    """configparser joins an indented line to the value above it: the password became part of the address
    (printed in its message) or of the known_hosts file name (a file created under it). Refused, naming the
    key, with nothing of the value."""
    (tmp_path / "id_test").write_text("not a key\n")
    values = {"ip": "127.0.0.1", "username": "me", "port": "22", "known_hosts": "kh", "key_file": "id_test",
              "timeout": "30"}
    lines = []
    for key, value in values.items():
        lines.append(f"{key} = {value}")
        if key == above:
            lines.append(f"    pwd = {SECRET}")
    path = write_ini(tmp_path, "[ssh_config]\n" + "\n".join(lines) + "\n")
    with pytest.raises(ConfigError) as info:
        config.load_config(path)
    assert info.value.message == (f"config file {path}: [ssh_config] key '{above}' runs over several lines (an "
                                  "indented line continues the value above it): remove the indent")
    assert SECRET not in " ".join(r.getMessage() for r in captured)
    assert not any(SECRET in p.name for p in tmp_path.iterdir())


@pytest.mark.parametrize("body, said", [
    ("ip=1.2.3.4\nusername=me\nip=5.6.7.8\n", "(line 4): key 'ip' is given twice"),
    (f"ip=1.2.3.4\nusername=me\n{SECRET}\n", "(line 4): a line that is neither [section], key = value nor a "
                                              "comment"),
])
def test_an_ini_error_names_the_line_and_key_never_the_value(tmp_path, body, said):
    path = write_ini(tmp_path, "[ssh_config]\n" + body)
    with pytest.raises(ConfigError) as info:
        config.load_config(path)
    assert info.value.message == f"config file {path} is not a valid ini file {said}"


def test_a_public_key_or_a_relative_remote_path_is_refused_naming_the_key(tmp_path):
    public = tmp_path / "id_ed25519.pub"
    public.write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOx me@host\n")
    path = write_ini(tmp_path, f"[ssh_config]\nip=1.2.3.4\nusername=me\nkey_file={public}\n")
    with pytest.raises(ConfigError) as info:
        config.load_config(path)
    assert info.value.message == (f"config file {path}: [ssh_config] key 'key_file': {public} is a public key; "
                                  "give its private key (the file without .pub)")
    path = write_ini(tmp_path, "[ssh_config]\nip=1.2.3.4\nusername=me\nremote_path=/usr/sbin:usr/bin\n")
    with pytest.raises(ConfigError) as info:
        config.load_config(path)
    assert info.value.message == (f"config file {path}: [ssh_config] key 'remote_path' must be absolute "
                                  "directories joined by ':', not '/usr/sbin:usr/bin'")


def test_missing_ini(tmp_path):
    with pytest.raises(ConfigError):
        config.load_config(tmp_path / "nope.ini")


def _warnings(caplog_records):
    return [r.getMessage() for r in caplog_records if r.levelno >= logging.WARNING]


@pytest.fixture
def captured():
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    handler = Keep(logging.DEBUG)
    logging.getLogger("msprof").addHandler(handler)
    yield records
    logging.getLogger("msprof").removeHandler(handler)


def test_readable_ini_with_password_warns(tmp_path, captured):
    config.load_config(write_ini(tmp_path, f"[ssh_config]\nip=1.2.3.4\nusername=u\npwd={SECRET}\n", 0o644))
    text = " ".join(_warnings(captured))
    assert "readable by group and others" in text and "chmod 600" in text and SECRET not in text


def test_private_ini_or_no_password_no_warning(tmp_path, captured):
    config.load_config(write_ini(tmp_path, f"[ssh_config]\nip=1.2.3.4\nusername=u\npwd={SECRET}\n", 0o600))
    config.load_config(write_ini(tmp_path, "[ssh_config]\nip=1.2.3.4\nusername=u\n", 0o644))
    assert not _warnings(captured)


def test_unknown_key_warns(tmp_path, captured):
    config.load_config(write_ini(tmp_path, "[ssh_config]\nip=1.2.3.4\nusername=u\npasswd=x\n"))
    assert "passwd" in " ".join(_warnings(captured))


def test_credentials_order(tmp_path, monkeypatch):
    monkeypatch.setenv(config.PASSWORD_ENV, "from-env")
    with_pwd = config.BoardConfig("h", "u", password="from-ini")
    creds = config.credentials(with_pwd)
    assert (creds.password, creds.password_source, creds.allow_agent) == ("from-ini", "ini", False)
    key = config.BoardConfig("h", "u", key_file=Path("/k"))
    creds = config.credentials(key)
    assert creds.key_files == ["/k"] and creds.password == "from-env" and not creds.allow_agent
    bare = config.credentials(config.BoardConfig("h", "u"))
    assert bare.allow_agent and bare.look_for_keys and bare.password == "from-env"
    monkeypatch.delenv(config.PASSWORD_ENV)
    bare = config.credentials(config.BoardConfig("h", "u"))
    assert bare.password is None and "agent" in bare.describe() and "from" not in bare.describe()


# -- acl.json ------------------------------------------------------------------------------------------
def test_profiler_section_and_merge(captured):
    section = acljson.profiler_section("/w/out", switch="ON", interval=5, acl_api="off", aac_metrics="pipeutilization")
    assert section == {"switch": "on", "output": "/w/out", "interval": "5", "acl_api": "off", "aacpu": "on",
                       "aac_metrics": "PipeUtilization"}
    merged = acljson.merge({"profiler": {"extra": "1", "switch": "off"}, "dump": {"dump_path": "x"}, "k": [1]},
                           section)
    assert merged["profiler"]["extra"] == "1" and merged["profiler"]["switch"] == "on"
    assert "dump" not in merged and merged["k"] == [1]
    assert "dump section" in " ".join(_warnings(captured))
    off = acljson.merge({"dump": {"dump_path": "x"}}, dict(section, switch="off"))
    assert "dump" in off


@pytest.mark.parametrize("call", [
    lambda: acljson.normalize_on_off("yes", "--aacpu"),
    lambda: acljson.normalize_metric("Bogus"),
    lambda: acljson.normalize_interval("-1"),
    lambda: acljson.normalize_interval("fast"),
])
def test_bad_values(call):
    with pytest.raises(UsageError):
        call()


def test_read_project_acl(tmp_path):
    assert acljson.read_project_acl(tmp_path / "acl.json") is None
    (tmp_path / "acl.json").write_text("{bad")
    with pytest.raises(ConfigError):
        acljson.read_project_acl(tmp_path / "acl.json")
    (tmp_path / "acl.json").write_text(json.dumps({"a": 1}))
    assert acljson.read_project_acl(tmp_path / "acl.json") == {"a": 1}


# -- CLI option validation (exit 2 before any connection) ----------------------------------------------
@pytest.mark.parametrize("args, text", [
    (["--acl_api", "maybe"], "--acl_api must be 'on' or 'off'"),
    (["--acl-api", "1"], "--acl_api must be 'on' or 'off'"),
    (["--aacpu", "enabled"], "--aacpu"),
    (["--switch", "true"], "--switch"),
    (["--aac_metrics", "Nope"], "unknown metric set"),
    (["--aac-metrics", "Nope"], "unknown metric set"),
    (["--interval", "x"], "--interval"),
    (["--nfs", "server-without-export"], "--nfs"),
    (["--output", "out;rm"], "forbidden character"),
    (["--remote-dir", "a$b"], "forbidden character"),
])
def test_cli_usage_errors(tmp_path, capsys, args, text):
    ini = write_ini(tmp_path, "[ssh_config]\nip=127.0.0.1\nusername=u\n")
    (tmp_path / "main").write_text("#!/bin/sh\n")
    code, err = _run_main(capsys, ["collect", "-m", str(tmp_path / "main"), "--config", str(ini), *args])
    assert code == 2, err
    assert text in err


def _run_main(capsys, argv):
    from msprof.cli import main

    with pytest.raises(SystemExit) as info:
        main(argv)
    return info.value.code, capsys.readouterr().err


def test_cli_requires_main(tmp_path, capsys):
    ini = write_ini(tmp_path, "[ssh_config]\nip=127.0.0.1\nusername=u\n")
    code, err = _run_main(capsys, ["collect", "--config", str(ini)])
    assert code == 2 and "--main" in err


def test_help_lists_options():
    result = CliRunner().invoke(cli, ["collect", "--help"])
    for option in ("--acl_api", "--acl-api", "--aac_metrics", "--aac-metrics", "--keep-remote", "--remote-dir",
                   "--timeout", "--accept-new-host-key", "--nfs", "--resume", "--all", "--output"):
        assert option in result.output


def test_parse_nfs():
    assert parse_nfs(":/srv/prof") == (None, "/srv/prof")
    assert parse_nfs("/srv/prof") == (None, "/srv/prof")
    assert parse_nfs("10.0.0.1:/srv/prof") == ("10.0.0.1", "/srv/prof")
    assert parse_nfs("[fe80::1]:/x") == ("fe80::1", "/x")
    with pytest.raises(UsageError):
        parse_nfs("10.0.0.1:srv")


def test_resolve_remote_dir():
    assert resolve_remote_dir("work", "/root") == "/root/work"
    assert resolve_remote_dir("~/a/b/", "/home/u") == "/home/u/a/b"
    assert resolve_remote_dir("/data/x", "/root") == "/data/x"
    assert resolve_remote_dir(None, "/root").startswith("/root/msprof-")
    for bad in ("../x", "/", "a/../../b"):
        with pytest.raises(UsageError):
            resolve_remote_dir(bad, "/root")


def test_project_files_skips_ini_output_and_acl(tmp_path):
    project = tmp_path / "p"
    (project / "output" / "JOBX").mkdir(parents=True)
    (project / "output" / "JOBX" / "f").write_text("x")
    (project / "model").mkdir()
    (project / "model" / "a.om").write_bytes(b"1234")
    (project / "main").write_text("#!/bin/sh\n")
    os.chmod(project / "main", 0o755)
    (project / "acl.json").write_text("{}")
    (project / "board.ini").write_text("[ssh_config]\n")
    found = walk(project.resolve(), {project / "board.ini": "the ini"}, leave_out=[project / "output"])
    rels = {rel: mode for _, rel, mode, _ in found.files}
    assert set(rels) == {"main", "model/a.om"} and rels["main"] & 0o111
    assert found.total == len("#!/bin/sh\n") + 4
    assert found.skipped == ["board.ini: the ini"]


# -- names and tar safety -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a\\b", "x\x00y", "x\ny", "x\x1b[31m", "x\x9b31m",
                                  "bad\udcffname", "x" * 256])
def test_unsafe_names_refused(name):
    with pytest.raises(RemoteError):
        check_name(name)


def test_relpaths():
    assert check_relpath("./JOBA/data/x") == ["JOBA", "data", "x"]
    for bad in ("/etc/passwd", "JOBA/../../x", "", "JOBA//x"):
        with pytest.raises(RemoteError):
            check_relpath(bad)


def _tar(members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for info, data in members:
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    buf.seek(0)
    return buf


def _file(name, data=b"abc", mode=0o644):
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    return info, data


def _manifest(*files, others=()):
    """The listing of JOBA with these files, their directories and ``others`` (symlinks, devices)."""
    m = Manifest("JOBA", dirs=["JOBA"], others=list(others))
    for rel, size in files:
        m.files[rel] = RemoteFile(rel, size, 0o644, 0)
        parent = rel.rsplit("/", 1)[0]
        while parent not in m.dirs:
            m.dirs.append(parent)
            parent = parent.rsplit("/", 1)[0]
    return m


def test_board_modes_are_held_to_our_umask(tmp_path):
    """A board's 0777 (its app ran with umask 000) is not copied: the pulled files and directories are no more
    open than the umask msprof holds results to (0027 at least), else any local user could change the raw
    data every later command analyses."""
    d = tarfile.TarInfo("JOBA/data")
    d.type, d.mode = tarfile.DIRTYPE, 0o777
    stream = _tar([(d, None), _file("JOBA/data/x", b"hello", 0o777), _file("JOBA/data/z", b"zz", 0o400)])
    found = _manifest(("JOBA/data/x", 5), ("JOBA/data/z", 2))
    old = os.umask(0o022)
    try:
        extract_tar(stream, found, tmp_path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "JOBA/data").st_mode) == 0o750
    assert stat.S_IMODE(os.stat(tmp_path / "JOBA/data/x").st_mode) == 0o750
    assert stat.S_IMODE(os.stat(tmp_path / "JOBA/data/z").st_mode) == 0o600


def test_extract_tar_good(tmp_path):
    d = tarfile.TarInfo("JOBA/data")
    d.type, d.mode = tarfile.DIRTYPE, 0o755
    link = tarfile.TarInfo("JOBA/data/y")
    link.type, link.linkname = tarfile.LNKTYPE, "JOBA/data/x"
    stream = _tar([(d, None), _file("JOBA/data/x", b"hello", 0o4755), (link, None)])
    found = _manifest(("JOBA/data/x", 5), ("JOBA/data/y", 5))
    extract_tar(stream, found, tmp_path)
    verify(tmp_path, found)
    assert (tmp_path / "JOBA/data/y").read_bytes() == b"hello"
    assert not os.stat(tmp_path / "JOBA/data/x").st_mode & 0o4000  # no setuid from the board


@pytest.mark.parametrize("members", [
    [_file("../evil")],
    [_file("/etc/evil")],
    [_file("JOBB/x")],
    [_file("JOBA/../../evil")],
    [_file("JOBA/bad\nname")],
])
def test_extract_tar_refuses_escapes(tmp_path, members):
    with pytest.raises(RemoteError):
        extract_tar(_tar(members), _manifest(), tmp_path / "root")
    assert not (tmp_path / "evil").exists()


def test_extract_tar_refuses_symlink_trick(tmp_path, captured):
    sym = tarfile.TarInfo("JOBA/link")
    sym.type, sym.linkname = tarfile.SYMTYPE, str(tmp_path / "outside")
    (tmp_path / "outside").mkdir()
    root = tmp_path / "root"
    root.mkdir()
    extract_tar(_tar([(sym, None)]), _manifest(others=["JOBA/link"]), root)  # listed: skipped with a warning
    assert not os.path.lexists(root / "JOBA/link")
    with pytest.raises(RemoteError, match="'JOBA/link', which its listing of JOBA shows as not there at all"):
        extract_tar(_tar([(sym, None)]), _manifest(), root)
    assert not os.path.lexists(root / "JOBA/link")
    hard = tarfile.TarInfo("JOBA/h")
    hard.type, hard.linkname = tarfile.LNKTYPE, "/etc/passwd"
    with pytest.raises(RemoteError):
        extract_tar(_tar([(hard, None)]), _manifest(), root)


def test_verify_and_local_state(tmp_path):
    found = _manifest(("JOBA/a", 3))
    assert local_state(tmp_path, found) == "absent"
    (tmp_path / "JOBA").mkdir()
    (tmp_path / "JOBA/a").write_bytes(b"abc")
    (tmp_path / "JOBA/collect.json").write_text("{}")
    assert local_state(tmp_path, found) == "same sizes"          # (then pulled and compared byte for byte)
    (tmp_path / "JOBA/a").write_bytes(b"abcd")
    assert local_state(tmp_path, found) == "different"
    with pytest.raises(RemoteError):
        verify(tmp_path, found)


# -- ini files: the documented example, hostile files, strict numbers (issue 10 #10) -------------------------
def _docs_ini_example() -> str:
    """The ```ini block of docs/collect.md, as a user would copy it."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "collect.md").read_text(encoding="utf-8")
    return text.split("```ini\n", 1)[1].split("```", 1)[0]


def test_ini_docs_example_with_inline_comments(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home" / ".ssh").mkdir(parents=True)
    (tmp_path / "home" / ".ssh" / "id_board").write_text("key")
    cfg = config.load_config(write_ini(tmp_path, _docs_ini_example()))
    assert (cfg.host, cfg.username, cfg.port, cfg.password) == ("192.168.1.100", "root", 22, "...")
    assert cfg.key_file == tmp_path / "home" / ".ssh" / "id_board"
    assert cfg.known_hosts == tmp_path / "board_known_hosts"
    assert (cfg.timeout, cfg.remote_path, cfg.transfer) == (15.0, "/usr/sbin:/sbin", "auto")


def test_ini_inline_comment_needs_whitespace(tmp_path):
    """'a;b' is a password, 'a ;b' a password and a comment (configparser inline_comment_prefixes)."""
    cfg = config.load_config(write_ini(tmp_path, "[ssh_config]\nip=1.2.3.4 # board\nusername=u\npwd=p;w#d ; c\n"))
    assert (cfg.host, cfg.password) == ("1.2.3.4", "p;w#d")


def _load_in_child(path, call="config.load_config", timeout=20):
    """``call(path)`` in a child process, so that a read that blocks (FIFO) fails the test instead of hanging."""
    code = ("import sys\nfrom pathlib import Path\nfrom msprof.collect import acljson, config\n"
            "from msprof.errors import ConfigError\n"
            f"try:\n    {call}(Path(sys.argv[1]))\nexcept ConfigError as e:\n"
            "    print(e.message); sys.exit(e.exit_code)\n")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    return subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_ini_fifo_refused_without_blocking(tmp_path):
    fifo = tmp_path / "board.ini"
    os.mkfifo(fifo)
    started = time.monotonic()
    proc = _load_in_child(fifo)
    assert proc.returncode == 5, proc.stderr
    assert proc.stdout.strip() == f"config file {fifo} is not a regular file (a FIFO)"
    assert time.monotonic() - started < 10


def test_ini_device_refused(tmp_path):
    link = tmp_path / "board.ini"
    link.symlink_to("/dev/zero")
    proc = _load_in_child(link)
    assert proc.returncode == 5, proc.stderr
    assert proc.stdout.strip() == f"config file {link} is not a regular file (a character device)"


def test_ini_huge_refused_without_reading(tmp_path):
    path = tmp_path / "board.ini"
    with open(path, "wb") as handle:
        handle.truncate(8 * 1024 * 1024 * 1024)  # sparse: reading it whole would take seconds and 8 GiB
    started = time.monotonic()
    proc = _load_in_child(path)
    assert proc.returncode == 5, proc.stderr
    assert proc.stdout.strip() == f"config file {path} is too large (8192 MiB; at most 1 MiB is read)"
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("port", ["3_5857", "\u0663\u0665", "\uff12\uff12", "+22", "0", "65536", "22.0", "0x16",
                                  "2 2", "-1"])
def test_ini_port_plain_ascii_digits(tmp_path, port):
    with pytest.raises(ConfigError) as info:
        config.load_config(write_ini(tmp_path, f"[ssh_config]\nip=1.2.3.4\nusername=u\nport={port}\n"))
    assert info.value.message == (f"config file {tmp_path / 'board.ini'}: [ssh_config] key 'port' must be a "
                                  f"number 1-65535, not {port!r}")


@pytest.mark.parametrize("port, expected", [("1", 1), ("65535", 65535), ("0022", 22)])
def test_ini_port_accepted(tmp_path, port, expected):
    assert config.load_config(write_ini(tmp_path, f"[ssh_config]\nip=h\nusername=u\nport={port}\n")).port == expected


@pytest.mark.parametrize("timeout", ["1_0", "\u0661\u0660", "inf", "nan", "1e3", "0"])
def test_ini_timeout_plain_number(tmp_path, timeout):
    with pytest.raises(ConfigError) as info:
        config.load_config(write_ini(tmp_path, f"[ssh_config]\nip=1.2.3.4\nusername=u\ntimeout={timeout}\n"))
    assert "'timeout'" in info.value.message


def test_project_acl_fifo_refused(tmp_path):
    os.mkfifo(tmp_path / "acl.json")
    proc = _load_in_child(tmp_path / "acl.json", call="acljson.read_project_acl")
    assert proc.returncode == 5, proc.stderr
    assert proc.stdout.strip() == f"{tmp_path / 'acl.json'} is not a regular file (a FIFO)"


# -- known_hosts patterns (port 22 names; the real-sshd tests cover [host]:port against OpenSSH itself) ------
@pytest.mark.parametrize("field, name, expected", [
    ("127.0.0.*", "127.0.0.1", True),
    ("127.0.0.*", "[127.0.0.1]:2222", False),
    ("*", "[127.0.0.1]:2222", True),
    ("[127.0.0.1]:*", "[127.0.0.1]:2222", True),
    ("[127.0.0.1]:*", "127.0.0.1", False),
    ("board?", "board1", True),
    ("board?", "board12", False),
    ("*.lab,!evil.lab", "evil.lab", False),
    ("!evil.lab,*.lab", "good.lab", True),
    ("!evil.lab", "good.lab", False),  # a negation alone never matches
    ("Board.LAB", "board.lab", True),
    ("10.0.0.1", "10.0.0.10", False),
    ("[10.0.0.1]", "10.0.0.1", False),  # '[' is literal, not a character class
])
def test_known_hosts_patterns(field, name, expected):
    from msprof.collect import knownhosts

    assert knownhosts.host_matches(field, name) is expected


def test_known_hosts_hashed_vector():
    """A hash computed by hand: HMAC-SHA1 with key = salt over the name, as ssh-keygen -H stores it."""
    import hashlib
    import hmac

    from msprof.collect import knownhosts

    salt = bytes(range(20))
    field = "|1|" + base64.b64encode(salt).decode() + "|" + base64.b64encode(
        hmac.new(salt, b"[10.0.0.7]:2222", hashlib.sha1).digest()).decode()
    assert knownhosts.host_matches(field, "[10.0.0.7]:2222")
    assert not knownhosts.host_matches(field, "10.0.0.7")
    assert not knownhosts.host_matches("|1|bad|", "10.0.0.7")


def test_known_hosts_preferred_types(tmp_path):
    from msprof.collect import knownhosts

    offered = ["ssh-ed25519", "ecdsa-sha2-nistp256", "rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"]
    blob = b"\x00\x00\x00\x07ssh-rsa" + b"\x00" * 8
    path = tmp_path / "kh"
    path.write_text("[b]:2222 ssh-rsa " + base64.b64encode(blob).decode() + "\n")
    lines = knownhosts.read_lines(path)
    assert knownhosts.preferred_key_types(lines, "[b]:2222", offered) == [
        "rsa-sha2-512", "rsa-sha2-256", "ssh-rsa", "ssh-ed25519", "ecdsa-sha2-nistp256"]
    assert knownhosts.preferred_key_types(lines, "other", offered) == offered


@pytest.mark.parametrize("path", ["/", "/bin", "/usr", "/usr/bin", "/usr/local/lib", "/etc", "/tmp", "/opt",
                                  "/proc/self", "/var/log", "HOME", "HOME/.."])
def test_system_directories(path, monkeypatch, tmp_path):
    from msprof.collect import project

    home = tmp_path / "home" / "me"
    home.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    path = Path(path.replace("HOME", str(home)))
    assert project.system_directory(path)
    with pytest.raises(UsageError):
        project.check_project(path.resolve(), force=False)
    project.check_project(path.resolve(), force=True)  # --force: no refusal
    (tmp_path / "work" / "proj").mkdir(parents=True)
    assert not project.system_directory(home / "proj")
    assert not project.system_directory(tmp_path / "work" / "proj")


@pytest.mark.parametrize("name, ok", [("JOBABCdef_0.1-x", True), ("JOB$(id)", False), ("JOB x", False),
                                      ("JOB\u00e9", False), ("JOB;rm", False), ("JOB" + "A" * 253, False)])
def test_job_names(name, ok):
    from msprof.collect.names import is_job_name

    assert is_job_name(name) is ok


@pytest.mark.parametrize("raw, shown", [(b"bad\xffname", "bad\\xffname"), ("a\nb\x1b[31m", "a\\nb\\x1b[31m"),
                                        ("rtl\u202eexe", "rtl\\u202eexe"), ("back\\slash", "back\\\\slash"),
                                        ("caf\u00e9", "caf\u00e9")])
def test_printable(raw, shown):
    from msprof.paths import printable

    assert printable(raw) == shown


# -- shell completion through click's protocol (issue 13 #6), as bash's completion function calls it ---------
def _complete(words: str):
    """What `msprof` answers to bash's completion function for the command line ``words`` (the cursor at the
    end): lines of 'type,value'."""
    cword = len(words.split()) - (0 if words.endswith(" ") else 1)
    env = dict(os.environ, COMP_WORDS=words, COMP_CWORD=str(cword), _MSPROF_COMPLETE="bash_complete",
               PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    proc = subprocess.run([sys.executable, "-m", "msprof"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    return [line for line in proc.stdout.splitlines() if line]


@pytest.mark.parametrize("words, expected", [
    ("msprof collect -m ", ["file,"]),
    ("msprof collect --main bui", ["file,bui"]),
    ("msprof collect --config bo", ["file,bo"]),
    ("msprof collect --output ", ["dir,"]),
    ("msprof collect --aac-metrics ", ["plain," + m for m in acljson.AAC_METRICS]),
    ("msprof collect --aac_metrics mem", ["plain,Memory", "plain,MemoryL0", "plain,MemoryUB"]),
    ("msprof collect --aac-metrics Pipe", ["plain,PipeUtilization"]),
    ("msprof collect --acl-api o", ["plain,on", "plain,off"]),
    ("msprof collect --switch of", ["plain,off"]),
])
def test_collect_completion(words, expected):
    assert _complete(words) == expected


def test_sizes_in_messages_are_readable():
    """A local disk too small for a few JOB files said "need 0.0 MB, 0.0 MB free" (found by a newcomer's
    trial): KiB below 10 MiB, as the board side says."""
    from msprof.collect.pull import check_local_space, kib
    from msprof.errors import DiskSpaceError

    assert (kib(45 * 1024), kib(10 * 1048576 - 1), kib(20 * 1048576)) == ("45 KiB", "10240 KiB", "20.0 MiB")
    # (more than any disk holds: the free space, which other processes change meanwhile, is only read)
    with pytest.raises(DiskSpaceError, match=rf"need {re.escape(kib(1 << 60))}, [0-9.]+ (KiB|MiB) free$"):
        check_local_space(Path("/tmp"), [_manifest(("JOBA/big", 1 << 60))])



def test_resume_with_nothing_recorded_is_said_before_connecting(tmp_path):
    """collect --resume with no unfinished pull in --output and no --remote-dir: exit 2 at once, the board never
    asked (here a port nothing listens on: connecting first made it a connection error, exit 3)."""
    import socket

    with socket.socket() as probe:            # a free port, closed again: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ini = tmp_path / "board.ini"
    ini.write_text(f"[ssh_config]\nip = 127.0.0.1\nport = {port}\nusername = nobody\n")
    proc = subprocess.run([sys.executable, "-m", "msprof", "collect", "--resume", "--config", str(ini), "--output",
                           str(tmp_path / "out")], capture_output=True, text=True, cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1])))
    assert proc.returncode == 2, proc.stderr
    assert "nothing to resume: no unfinished pull recorded in" in proc.stderr and "connect" not in proc.stderr

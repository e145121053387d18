"""The command line's manners (issue 13 #6, #9): options where users put them, the current directory as a
collection, bounded ids, checked styles, completion through click's own protocol, a quiet broken pipe."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures import profgen
from fixtures.board import jobgen
from fixtures.networks import small_job

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return jobgen.write_job(tmp_path_factory.mktemp("cli"), small_job())


def test_verbosity_options_after_the_command(job, msprof_cli):
    quiet = msprof_cli("import", "-dir", job)
    loud = msprof_cli("import", "-dir", job, "-v")
    debug = msprof_cli("import", "-dir", job, "-vv")
    assert quiet.returncode == loud.returncode == debug.returncode == 0, loud.stderr
    assert "imported" in quiet.stderr and "records in" not in quiet.stderr
    assert "records in" in loud.stderr and "begin: import" not in loud.stderr     # -v: info
    assert "begin: import" in debug.stderr                                       # -vv: debug
    silent = msprof_cli("import", "-dir", job, "-q")
    assert silent.returncode == 0 and silent.stderr == ""


def test_style_must_be_one_of_tabulates(job, msprof_cli):
    proc = msprof_cli("show", "-dir", job, "--style", "nonsense")
    assert proc.returncode == 2
    assert "nonsense" in proc.stderr and "github" in proc.stderr and "grid" in proc.stderr


@pytest.mark.parametrize("value", [str(1 << 63), "-1"])
def test_ids_beyond_64_bits_are_usage_errors(job, msprof_cli, value):
    proc = msprof_cli("export", "summary", "-dir", job, "--model-id", value, "--iteration-id", "1")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_the_current_directory_counts_as_the_collection(job, tmp_path, msprof_cli):
    proc = msprof_cli("query", cwd=job)
    assert proc.returncode == 0, proc.stderr
    assert "tiny" in proc.stdout and "using" not in proc.stderr
    prof = profgen.write_prof(tmp_path)
    for where in (prof, prof / "device_0"):
        proc = msprof_cli("query", cwd=where)
        assert proc.returncode == 0, proc.stderr
        assert "resnet50" in proc.stdout                     # read as PROF_, by its content


def complete(*words):
    """What click's bash completion answers for ``msprof <words>`` (the cursor on the last word)."""
    env = dict(os.environ, _MSPROF_COMPLETE="bash_complete", COMP_WORDS=" ".join(("msprof",) + words),
               COMP_CWORD=str(len(words)), PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "msprof"], env=env, capture_output=True, text=True, timeout=30)
    return [tuple(line.split(",", 1)) for line in proc.stdout.splitlines()]


@pytest.mark.parametrize("argv", [("import", "-dir", "{file}"), ("show", "-dir", "{file}"),
                                  ("compare", "{file}", "{job}"), ("advise", "-dir", "{file}")])
def test_a_file_where_a_directory_is_wanted_is_one_line(job, tmp_path, msprof_cli, argv):
    """Every path a command reads says it in msprof's one line (exit 2), as a missing one does."""
    file = tmp_path / "notes.txt"
    file.write_text("not a collection\n")
    proc = msprof_cli(*[a.format(file=file, job=job) for a in argv])
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == f"msprof: error: {file} is not a directory"


def test_every_command_takes_v_and_q_after_its_name():
    """README: "-v/-q work before or after the command name" — for every command (collect and demo refused
    them with click's "No such option")."""
    import click

    from msprof import cli

    def commands(group, prefix=()):
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if isinstance(command, click.Group):      # a group takes them too (msprof export -q summary)
                yield " ".join(prefix + (name,)), command
                yield from commands(command, prefix + (name,))
            else:
                yield " ".join(prefix + (name,)), command

    found = dict(commands(cli.cli))
    assert {"collect", "demo", "show", "import", "export", "export summary", "export timeline"} <= set(found)
    for name, command in found.items():
        options = {o for p in command.params for o in p.opts}
        assert {"-v", "--verbose", "-q", "--quiet"} <= options, name


def test_a_path_that_does_not_exist_is_said_so(tmp_path, msprof_cli):
    proc = msprof_cli("import", "-dir", tmp_path / "nonexistent")
    assert proc.returncode == 2 and proc.stderr.strip() == f"msprof: error: {tmp_path / 'nonexistent'} does not exist"


def test_invalid_json_names_line_and_column_once(tmp_path):
    from msprof.collection import _read_json
    from msprof.errors import DataError

    for text, said in (('{"devices": "0', 'line 1: invalid JSON (Unterminated string starting at column 13)'),
                       ('{"a": 1,,}', 'line 1: invalid JSON (Expecting property name enclosed in double quotes'
                                      ' at column 9)')):
        path = tmp_path / "info.json.0"
        path.write_text(text)
        with pytest.raises(DataError) as raised:
            _read_json(path)
        assert raised.value.message == f"{path}: {said}"


def test_an_output_that_is_a_file_is_refused_by_name(job, tmp_path, msprof_cli):
    """--output naming a file (or a path through one): exit 7, the file named, nothing written."""
    file = tmp_path / "notes.txt"
    file.write_text("not a directory\n")
    for output in (file, file / "sub"):
        proc = msprof_cli("export", "summary", "-dir", job, "--output", output)
        assert proc.returncode == 7, proc.stderr
        assert f"msprof: error: cannot write {file}: Not a directory (choose another --output DIR)" in proc.stderr
        assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert file.read_text() == "not a directory\n"


def test_completion_of_options_and_values():
    assert complete("show", "-dir", "msprof-d") == [("dir", "msprof-d")]    # the shell completes directories
    assert complete("export", "summary", "--output", "x") == [("dir", "x")]
    assert ("plain", "github") in complete("show", "--style", "git")
    assert {v for k, v in complete("show", "--format", "")} == {"table", "csv", "json"}
    assert ("plain", "--model-id") in complete("show", "--mod")
    assert ("plain", "summary") in complete("export", "su")


def test_a_closed_pipe_ends_quietly(job):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(f"'{sys.executable}' -m msprof show -dir '{job}' | head -1", shell=True, env=env,
                          capture_output=True, text=True, timeout=60, executable="/bin/bash")
    assert len(proc.stdout.splitlines()) == 1
    status = subprocess.run(f"set -o pipefail; '{sys.executable}' -m msprof show -dir '{job}' | head -1 >/dev/null",
                            shell=True, env=env, capture_output=True, text=True, timeout=60, executable="/bin/bash")
    assert status.returncode == 0, status.stderr
    assert "Error" not in status.stderr and "Exception" not in status.stderr


@pytest.mark.parametrize("wrapped", [True, False])
def test_an_interrupt_wrapped_by_python_is_an_interrupt(monkeypatch, capsys, wrapped):
    """A Ctrl-C that lands in a class body's __set_name__ reaches msprof as RuntimeError("Error calling
    __set_name__ ...") caused by the KeyboardInterrupt (seen once in the start-up test above): exit 130,
    "interrupted", like any Ctrl-C. A RuntimeError of msprof's own stays an internal error (1)."""
    from msprof import api, cli

    def query(*args, **kwargs):
        if wrapped:
            try:
                raise KeyboardInterrupt
            except KeyboardInterrupt as interrupt:
                raise RuntimeError("Error calling __set_name__ on 'Field' instance") from interrupt
        raise RuntimeError("a bug")

    monkeypatch.setattr(api, "query", query)
    with pytest.raises(SystemExit) as ended:
        cli.main(["-q", "query", "-dir", "."])
    err = capsys.readouterr().err
    if wrapped:
        assert ended.value.code == 130 and "msprof: interrupted" in err and "internal error" not in err
    else:
        assert ended.value.code == 1 and "internal error: RuntimeError: a bug" in err


def test_an_early_ctrl_c_prints_no_traceback_from_msprof():
    """Ctrl-C at any moment of start-up: from msprof's first line on it ends quietly with 130. (A signal
    in the interpreter's own first milliseconds, while it loads site-packages, is Python's to report:
    those tracebacks hold no msprof frame; Python may also end with 1 and a message of its own start-up,
    "Could not import runpy module" or a "Fatal Python error: init_…" (init_import_site,
    init_interp_main: can't initialize signals, …), when the signal lands before ``-m`` can run anything.)"""
    import signal
    import time

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    interpreter_start_up = ("Could not import runpy module", "Fatal Python error: init_")
    ours = []
    for step in range(40):
        proc = subprocess.Popen([sys.executable, "-m", "msprof", "query", "-dir", "/nonexistent"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(step * 0.004)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        # a frame of msprof's own code (not the import system's message naming a file it looked for while
        # finding the package: "No such file or directory: '…/msprof/__init__.abi3.so'")
        # (a signal on the package's first line, before any of its code has run, is start-up's too: seen once
        # under heavy load, 'File ".../msprof/__init__.py", line 1' its only frame of msprof)
        first_line = f'File "{ROOT / "msprof" / "__init__.py"}", line 1, in <module>'
        if "Traceback" in err and f'File "{ROOT / "msprof"}' in err and \
                err.count(f'File "{ROOT / "msprof"}') > err.count(first_line):
            ours.append((step * 4, err[-500:]))
        elif "Traceback" not in err and not err.startswith(interpreter_start_up):
            assert proc.returncode in (130, 2, -signal.SIGINT), (step, proc.returncode, err)
    assert ours == []

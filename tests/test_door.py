"""Every command that writes a file checks its target at the door, before any work: a folder that
does not exist, a name longer than the file system's NAME_MAX, a FIFO (or a symlink to one), a
folder where a file is named, a folder or a file that this user cannot write. Each is refused in one
line that names the option once, with exit status 2 (a usage error, as argparse's), and nothing is
computed or created. (What the writers do with a symlink or a device: test_files.py.)"""
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from mlp_ref.classroom import animations, cli, deck, explorable, figures, grading
from mlp_ref.fast import bench
from mlp_ref.measurements import permuted

ROOT = Path(__file__).resolve().parents[1]

#: command -> (its option, how argv names a target, the name of the file written in a folder)
FILE_COMMANDS = {
    "explore": ("--html", lambda p: ["explore", "--html", p], ".html"),
    "slides": ("--out", lambda p: ["slides", "--out", p], ".pdf"),
    "continual-table": ("--json", lambda p: ["continual-table", "--json", p], ".json"),
    "bench": ("--json", lambda p: ["bench", "--json", p], ".json"),
    "check": ("--gradebook", lambda p: ["check", "--gradebook", p, "never_graded.py"], ".csv"),
}
FOLDER_COMMANDS = {
    "figures": (lambda p: ["figures", "--out", p, "--only", "seed_problem"], "seed_problem.png"),
    "animate": (lambda p: ["animate", "--out", p], "backprop.gif"),
}


@pytest.fixture
def no_work(monkeypatch):
    """Every command's work fails the test: a refusal must come before it."""
    def work(*args, **kwargs):
        raise AssertionError("the command worked before it checked its target")
    for module, name in [(explorable, "page_data"), (deck, "draw"), (permuted, "run"), (bench, "run"),
                         (animations, "gif"), (grading, "grade_file")]:
        monkeypatch.setattr(module, name, work)
    monkeypatch.setattr(figures, "FIGURES", dict.fromkeys(figures.FIGURES, work))


def refused_in_one_line(argv, option, capsys):
    """cli.main(argv) is 2 and says one line that starts with ``option`` and names it once."""
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"{option}: ") and err.count(option) == 1, err
    return err


def file_targets(tmp_path, ext):
    """(kind, bad target) for a command that writes one file."""
    os.mkfifo(tmp_path / "fifo")
    os.symlink("fifo", tmp_path / "to_fifo")
    name_max = os.pathconf(tmp_path, "PC_NAME_MAX")
    return [("missing folder", tmp_path / "nope" / f"x{ext}"),
            ("too long", tmp_path / ("n" * (name_max + 1 - len(ext)) + ext)),
            ("fifo", tmp_path / "fifo"),
            ("symlink to a fifo", tmp_path / "to_fifo"),
            ("folder", tmp_path)]


@pytest.mark.parametrize("command", FILE_COMMANDS)
def test_a_file_command_refuses_a_bad_target_at_once_in_one_line(command, tmp_path, no_work, capsys):
    option, argv, ext = FILE_COMMANDS[command]
    for kind, target in file_targets(tmp_path, ext):
        before = sorted(os.listdir(tmp_path))
        err = refused_in_one_line(argv(str(target)), option, capsys)
        assert sorted(os.listdir(tmp_path)) == before, kind           # nothing made, nothing replaced
        assert stat.S_ISFIFO(os.stat(tmp_path / "fifo").st_mode) and os.path.islink(tmp_path / "to_fifo")
        if kind == "too long":
            assert str(os.pathconf(tmp_path, "PC_NAME_MAX")) in err


def test_slides_refuse_a_pdf_whose_notes_file_could_not_be_written(tmp_path, no_work, capsys):
    """FILE.pdf fits in NAME_MAX, its notes FILE.notes.md (5 bytes more) do not: refused before
    the PDF is drawn, not after it is written. A device (/dev/null, through a symlink here) is
    refused too: its notes would be a new file beside it, in /dev."""
    stem = "s" * (os.pathconf(tmp_path, "PC_NAME_MAX") - len(".pdf"))
    err = refused_in_one_line(["slides", "--out", str(tmp_path / f"{stem}.pdf")], "--out", capsys)
    assert ".notes.md" in err and os.listdir(tmp_path) == []
    os.symlink(os.devnull, tmp_path / "null.pdf")          # (nothing is written: no_work)
    refused_in_one_line(["slides", "--out", str(tmp_path / "null.pdf")], "--out", capsys)
    assert os.listdir(tmp_path) == ["null.pdf"] and stat.S_ISCHR(os.stat(os.devnull).st_mode)


@pytest.mark.parametrize("command", FOLDER_COMMANDS)
def test_a_folder_command_refuses_a_bad_folder_or_file_in_it_at_once(command, tmp_path, no_work, capsys):
    argv, written = FOLDER_COMMANDS[command]
    (tmp_path / "file").write_bytes(b"x")
    (tmp_path / "out").mkdir()
    os.mkfifo(tmp_path / "out" / written)                              # the file it would write
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / written).mkdir()                              # a folder under its name
    name_max = os.pathconf(tmp_path, "PC_NAME_MAX")
    for kind, folder in [("under a file", tmp_path / "file" / "sub"), ("a fifo", tmp_path / "out" / written),
                         ("too long", tmp_path / "new" / ("n" * (name_max + 1))),
                         ("a fifo in it", tmp_path / "out"), ("a folder in it", tmp_path / "busy")]:
        before = sorted(os.walk(tmp_path))
        refused_in_one_line(argv(str(folder)), "--out", capsys)
        assert sorted(os.walk(tmp_path)) == before, kind              # not even the folder made
    assert stat.S_ISFIFO(os.stat(tmp_path / "out" / written).st_mode)


def test_the_command_line_exits_2_at_the_door_without_a_traceback(tmp_path):
    """As a process: `python -m mlp_ref slides --out nope/x.pdf` (the issue's example)."""
    env = dict(os.environ, MPLBACKEND="Agg",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    res = subprocess.run([sys.executable, "-m", "mlp_ref", "slides", "--out", "nope/x.pdf"], cwd=tmp_path,
                         capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 2 and res.stdout == "" and res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith("--out: ") and "nope" in res.stderr and os.listdir(tmp_path) == []


# -- what this user cannot write ---------------------------------------------------------------
#: a child that runs every command against the targets of argv[1] (a JSON list of argvs) as an
#: unprivileged user (root drops to nobody after the imports; root may write anywhere), with the
#: commands' work replaced by a failure, and prints each one's (status, stderr)
UNPRIVILEGED = """
import contextlib, io, json, os, sys
from mlp_ref.classroom import animations, cli, deck, explorable, figures, grading
from mlp_ref.fast import bench
from mlp_ref.measurements import permuted
def work(*args, **kwargs):
    raise AssertionError("the command worked before it checked its target")
for module, name in [(explorable, "page_data"), (deck, "draw"), (permuted, "run"), (bench, "run"),
                     (animations, "gif"), (grading, "grade_file")]:
    setattr(module, name, work)
figures.FIGURES = dict.fromkeys(figures.FIGURES, work)
if os.geteuid() == 0:
    os.setgid(65534)
    os.setuid(65534)
said = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = cli.main(argv)
    said.append((status, err.getvalue()))
print(json.dumps(said))
"""


def test_what_this_user_cannot_write_is_refused_at_once():
    """A read-only folder (a file in it, a folder to make in it), a read-only file, and (when
    another user can be played, as root) another user's file in a sticky folder like /tmp."""
    base = Path(tempfile.mkdtemp(prefix="mlp-ref-door-"))      # reachable by every user
    try:
        base.chmod(0o755)
        (base / "ro").mkdir(mode=0o555)
        (base / "ro").chmod(0o555)
        (base / "rw").mkdir()
        (base / "rw").chmod(0o777)
        (base / "rw" / "old.json").write_text("old")
        (base / "rw" / "old.json").chmod(0o444)
        (base / "sticky").mkdir()
        (base / "sticky").chmod(0o1777)
        (base / "sticky" / "theirs.json").write_text("theirs")   # the runner's, not nobody's
        (base / "sticky" / "theirs.json").chmod(0o666)
        cases = [(FILE_COMMANDS[c][0], FILE_COMMANDS[c][1](str(base / "ro" / f"x{FILE_COMMANDS[c][2]}")))
                 for c in FILE_COMMANDS]
        cases += [(FILE_COMMANDS[c][0], FILE_COMMANDS[c][1](str(base / "rw" / "old.json")))
                  for c in ("continual-table", "bench")]
        cases += [("--out", FOLDER_COMMANDS[c][0](str(base / "ro" / "new"))) for c in FOLDER_COMMANDS]
        cases += [("--out", FOLDER_COMMANDS[c][0](str(base / "ro"))) for c in FOLDER_COMMANDS]
        if os.geteuid() == 0:
            cases += [("--json", FILE_COMMANDS["continual-table"][1](str(base / "sticky" / "theirs.json")))]
        env = dict(os.environ, MPLBACKEND="Agg",
                   PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        res = subprocess.run([sys.executable, "-c", textwrap.dedent(UNPRIVILEGED),
                              json.dumps([argv for _, argv in cases])],
                             capture_output=True, text=True, env=env, cwd=base, timeout=60)
        assert res.returncode == 0, res.stderr
        for (option, argv), (status, err) in zip(cases, json.loads(res.stdout)):
            assert status == 2 and err.count("\n") == 1, (argv, err)
            assert err.startswith(f"{option}: ") and err.count(option) == 1, (argv, err)
        assert os.listdir(base / "ro") == [] and (base / "rw" / "old.json").read_text() == "old"
        assert (base / "sticky" / "theirs.json").read_text() == "theirs"
    finally:
        for folder in ("ro", "rw", "sticky"):
            if (base / folder).exists():
                (base / folder).chmod(0o755)
        shutil.rmtree(base)

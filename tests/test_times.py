"""The times README.md and the teacher's guide state are those of the committed measurement,
benchmarks/classroom.json (``python benchmarks/classroom.py --json benchmarks/classroom.json``,
every classroom command and tutorial in a fresh process on the project's 2-core machine): no test
times anything, and no stated time is anyone's guess."""
import json
import re

from _runs import ROOT

MEASURED = json.loads((ROOT / "benchmarks" / "classroom.json").read_text())
ROWS = MEASURED["rows"]
TUTORIALS = [f"tutorial {n:02d}" for n in range(1, 10)]


def cpu(name):
    return f"{ROWS[name]['cpu_s']:.1f}"


def test_the_run_measured_every_row_and_each_met_its_target():
    assert set(TUTORIALS) < set(ROWS)
    for name in ("figures", "continual-table", "explore --html", "animate", "slides", "python -m pytest"):
        assert name in ROWS, name
    for name, row in ROWS.items():
        # (the suite's own row ran this very test against the file it was about to replace: its
        # exit status says nothing of the run)
        assert (row["status"] == 0 or name == "python -m pytest") and row["cpu_s"] <= row["target_cpu_s"], \
            (name, row)


def test_the_guide_states_each_tutorials_cpu_seconds():
    guide = (ROOT / "tutorials" / "README.md").read_text()
    table = guide[guide.index("| tutorial | learning goals"):]
    table = table[:table.index("\n\n")]
    cells = re.findall(r"^\| `(\d\d)_\w+\.py` \|.*\| ([^|]+) \|$", table, re.M)
    assert [n for n, _ in cells] == [f"{n:02d}" for n in range(1, 10)]
    for n, cell in cells:
        assert cell.split()[0] == cpu(f"tutorial {n}"), (n, cell)


def test_the_readme_states_the_measured_times():
    readme = " ".join((ROOT / "README.md").read_text().split())
    others = max((ROWS[t]["cpu_s"] for t in TUTORIALS if t != "tutorial 07"))
    stated = (f"each tutorial at most {others:.1f} (tutorial 07 with the three frameworks installed "
              f"{cpu('tutorial 07')}), `figures` {cpu('figures')}, `continual-table` "
              f"{cpu('continual-table')}, `explore --html` {cpu('explore --html')}, `animate` "
              f"{cpu('animate')}, `slides` {cpu('slides')}, and `python -m pytest` "
              f"{cpu('python -m pytest')}")
    assert stated in readme

"""What the README says about the machines the suite runs on is what setup.cfg and .ci/run do."""
import configparser
import re
import subprocess
import sys

from _runs import ROOT


def readme_section():
    text = (ROOT / "README.md").read_text()
    return text.split("## Tests, and the machines they run on", 1)[1].split("\n## ", 1)[0]


def test_the_readme_names_the_floors_setup_cfg_declares():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    floors = dict(re.findall(r"(\w+) >= ([\d.]+)", cfg["options"]["install_requires"]))
    section = " ".join(readme_section().split())
    assert f"numpy {floors['numpy']} with matplotlib {floors['matplotlib']}" in section


def test_the_fast_suite_is_the_default_and_ci_runs_the_slow_one_and_the_matrix():
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(ROOT / "setup.cfg")
    assert '-m "not slow"' in cfg["tool:pytest"]["addopts"]
    assert "error::RuntimeWarning" in cfg["tool:pytest"]["filterwarnings"]
    run = (ROOT / ".ci" / "run").read_text()
    assert "python -m pytest -q -m slow -n 2" in run
    assert "for version in 3.12 3.13" in run and "machines.py" in run
    assert "pytest-xdist" in cfg["options.extras_require"]["test"]
    assert "setuptools" in cfg["options.extras_require"]["test"]


def test_the_matrix_names_only_features_this_cpu_has_and_every_kernel_it_can_run():
    """numpy refuses to disable a feature the CPU lacks: each configuration names only those it has."""
    rows = subprocess.run([sys.executable, str(ROOT / ".ci" / "machines.py")], capture_output=True,
                          text=True, check=True).stdout.splitlines()
    names = [row.split("\t")[0] for row in rows]
    assert {"OpenBLAS Prescott kernel", "OpenBLAS Haswell kernel", "1 BLAS thread",
            "2 BLAS threads"} <= set(names)
    from numpy.lib import NumpyVersion
    import numpy as np
    if NumpyVersion(np.__version__) >= "2.0.0":
        from numpy._core._multiarray_umath import __cpu_features__
    else:
        from numpy.core._multiarray_umath import __cpu_features__
    for row in rows:
        for variable in row.split("\t")[1].split():
            key, value = variable.split("=")
            if key == "NPY_DISABLE_CPU_FEATURES":
                assert all(__cpu_features__[f] for f in value.split(","))
    assert ("OpenBLAS SkylakeX kernel" in names) == bool(__cpu_features__.get("AVX512F"))

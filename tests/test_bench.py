"""The bench command end to end on tiny sizes, its JSON, and its figure. No timing assertions:
machines are noisy; what is asserted is that every measurement is there and well formed."""
import json
import platform
import sys

import _runs
import numpy as np
import pytest
from _runs import TINY_BENCH

from mlp_ref import fast, fixes, jacobian
from mlp_ref.classroom import cli
from mlp_ref.fast import bench
from mlp_ref.measurements.projection_cost import load as load_projection_cost
from mlp_ref.measurements.projection_cost import projection_cost_data

GLIBC = platform.libc_ver()[0] == "glibc"
TINY = TINY_BENCH[:TINY_BENCH.index("--dtype")]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "out" / "bench.json"
    return path, bench.run(sizes=[5, 4, 3], batch=8, repeats=2, dense_repeats=1,
                           isolate=False, log=lambda message: None, memory_rows=(4, 8))


@pytest.fixture(scope="module")
def bench_command(tmp_path_factory):
    """(Run, JSON path) of ``python -m mlp_ref bench`` on tiny sizes, in a process of its own
    with one BLAS thread (what the bench reports it found)."""
    folder = tmp_path_factory.mktemp("bench-command")
    path = folder / "bench.json"
    env = dict(_runs.tutorial_env(), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return _runs.run([sys.executable, "-m", "mlp_ref", *TINY_BENCH, "--json", str(path)], env=env,
               cwd=folder), path


@pytest.mark.slow
def test_bench_command_prints_the_machine_and_the_table(bench_command):
    run, path = bench_command
    assert run.returncode == 0, run.stderr[-3000:]
    out, err = run.stdout, run.stderr
    assert out.startswith("BLAS: ")
    assert "threads: 1 (from $OPENBLAS_NUM_THREADS)" in out        # what the bench found
    for column in ("measurement", "median ms", "x grad", "faults", "peak MiB", "glibc default",
                   "constraints n", "Gram ms", "dense ms", "speed-up", "Gram MiB", "dense MiB"):
        assert column in out
    for row in ("gradient", "step (gradient + update)", "its matmuls alone (floor)",
                "project (keep 0, n = 8)", "the same, refine=0", "restore, one iteration",
                "reference: net.gradient", "reference: net.step", "reference: fixes.project",
                "gradient / its matmuls:", "project / gradient:", "restore / gradient:",
                "reference / fast gradient:", "reference / fast project:",
                "peak memory project / grad:"):
        assert row in out
    assert "float64: sizes [5, 4, 3], batch 8" in out and "float32" not in out
    assert "[float64] gradient, step and their matmuls, project, restore, the reference, glibc default" in err
    assert "each group in a fresh process" in out                    # the command isolates
    saved = json.loads(path.read_text())
    assert saved["results"][0]["dtype"] == "float64" and saved["machine"]["isolated_processes"]
    if GLIBC:                  # glibc: the second setting is measured
        assert "glibc keeping freed memory" in out and "(glibc keeping freed memory)" in out
        kept = saved["results"][0]["kept"]
        assert set(kept["timings"]) == set(saved["results"][0]["timings"])
        assert kept["project_over_gradient"] > 0


def test_bench_is_registered_in_the_cli():
    assert "bench" in cli.COMMANDS
    args = cli.build_parser().parse_args(TINY)
    assert args.sizes == [5, 4, 3] and args.batch == 8 and args.dtype == "both"


def test_json_has_the_expected_keys(tiny_run):
    _, results = tiny_run
    text = json.dumps(results)                                 # JSON-ready: plain types only
    results = json.loads(text)
    assert set(results) == {"machine", "config", "results", "memory"}
    assert {"blas", "threads", "threads_source", "cpus", "numpy"} <= set(results["machine"])
    assert [r["dtype"] for r in results["results"]] == ["float64", "float32"]
    for r in results["results"]:
        assert set(r["timings"]) == {"gradient", "step", "products", "project", "project_refine0",
                                     "restore", "reference_gradient", "reference_step",
                                     "reference_project"}
        for t in r["timings"].values():
            assert t["median_s"] > 0 and len(t["times_s"]) == 2 and t["faults"] >= 0
            assert t["floor_s"] > 0                      # the matmuls timed in the same process
        assert r["timings"]["gradient"]["floor_s"] == r["timings"]["products"]["median_s"]
        assert r["kept"] is None                         # one process: one allocator setting
        assert set(r["peak_bytes"]) == {"gradient", "step", "project", "reference_gradient",
                                        "reference_step", "reference_project"}
        for key in [k for _, k in bench.RATIOS] + ["products_gflops", "project_peak_over_gradient"]:
            assert r[key] > 0
        assert [row["n"] for row in r["sweep"]] == [8]            # counts below the batch, then the batch
        row = r["sweep"][0]
        assert row["gram_s"] > 0 and row["dense_s"] > 0 and row["speedup"] > 0
        assert row["dense_bytes_estimate"] == 8 * 1 * r["n_params"] * np.dtype(r["dtype"]).itemsize


def test_the_dense_projection_is_skipped_above_the_memory_limit():
    r = bench.bench_dtype(np.float64, sizes=[5, 4, 3], batch=8, repeats=1, isolate=False,
                          log=lambda message: None)
    r["sweep"] = bench.bench_sweep(np.float64, sizes=[5, 4, 3], batch=8, dense_repeats=1,
                                   dense_limit=100, isolate=False, log=lambda message: None)
    row = r["sweep"][0]
    assert row["dense_s"] is None and row["speedup"] is None and "dense skipped" in row["note"]
    data = projection_cost_data({"results": [r]})
    assert np.isnan(data["dense_s"]).all() and data["gram_s"][0] > 0


def test_ratios_divide_each_time_by_the_floor_of_its_own_process():
    timings = {"gradient": {"median_s": 12.0, "floor_s": 10.0},
               "step": {"median_s": 13.2, "floor_s": 10.0},
               "products": {"median_s": 10.0, "floor_s": 10.0},
               "project": {"median_s": 40.0, "floor_s": 20.0},      # a process that ran at half speed
               "restore": {"median_s": 30.0, "floor_s": 10.0},
               "reference_gradient": {"median_s": 18.0, "floor_s": 10.0},
               "reference_project": {"median_s": 60.0, "floor_s": 10.0}}
    ratios = bench._ratios(timings)
    assert ratios == pytest.approx({"gradient_over_products": 1.2, "step_over_gradient": 1.1,
                                    "project_over_gradient": 2.0 / 1.2, "restore_over_gradient": 2.5,
                                    "reference_gradient_over_gradient": 1.5,
                                    "reference_project_over_project": 3.0}, rel=1e-15)


def test_keeping_memory_needs_a_process_of_its_own():
    with pytest.raises(ValueError, match="^keep_memory: needs isolate=True"):
        bench._call(False, len, [], keep_memory=True)


def _second_allocation_faults(keep):
    """In a fresh process: the page faults of filling a 24 MiB array, the second time one is made."""
    if keep and not bench.keep_freed_memory():
        return None
    for _ in range(2):
        before = bench._faults()
        a = np.ones(3 * 2**20)                           # 24 MiB, written: every page touched
        faults = bench._faults() - before
        del a
    return faults


@pytest.mark.skipif(not GLIBC, reason="glibc only")
def test_kept_memory_is_reused_without_page_faults():
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        kept = pool.submit(_second_allocation_faults, True).result()
    pages = 24 * 2**20 // 4096
    assert kept < 0.05 * pages                           # the freed 24 MiB came back as it was
    # (with glibc's defaults, how many pages fault again depends on what the process allocated
    # and freed before: the bench shows those counts; they are not asserted here)


def test_constraint_counts_stop_at_the_batch():
    assert bench.constraint_counts(256) == [16, 32, 64, 128, 256]
    assert bench.constraint_counts(100) == [16, 32, 64, 100]
    assert bench.constraint_counts(8) == [8]


def test_step_products_are_the_steps_matmuls():
    net, X, G = bench.problem([5, 4, 3], 8)
    products, flops = bench.step_products(net, X, G)
    products()
    # forward 8x5x4 + 8x4x3; dW: 5x8x4 + 4x8x3; da1: 8x3x4 -- each 2 flops per multiply-add
    assert flops == 2 * (8 * 5 * 4 + 8 * 4 * 3 + 5 * 8 * 4 + 4 * 8 * 3 + 8 * 3 * 4)


def test_dense_projection_equals_the_gram_projection():
    net, X, G = bench.problem([6, 7, 5, 3], 10)
    for keep_X in (None, X[:4]):
        a = jacobian.flatten(bench.dense_project(net, X, G, keep=[0], keep_X=keep_X))
        b = jacobian.flatten(fixes.project(net, X, G, keep=[0], keep_X=keep_X))
        c = jacobian.flatten(fixes.project_dense(net, X, G, keep=[0], keep_X=keep_X))
        assert np.linalg.norm(a - b) <= 1e-12 * np.linalg.norm(b)
        assert np.linalg.norm(c - b) <= 1e-12 * np.linalg.norm(b)


def test_machine_info_reads_the_thread_count_from_the_environment(monkeypatch):
    for var in bench.THREAD_VARIABLES:
        monkeypatch.delenv(var, raising=False)
    info = bench.machine_info()
    assert info["threads"] == info["cpus"] and "threadpoolctl" in info["threads_source"]
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    info = bench.machine_info()
    assert info["threads"] == 3 and "OMP_NUM_THREADS" in info["threads_source"]


def test_projection_cost_plot_returns_a_wide_figure(tiny_run):
    from matplotlib.figure import Figure

    from mlp_ref import plots

    _, results = tiny_run
    fig = plots.projection_cost(projection_cost_data(results))
    assert isinstance(fig, Figure)
    assert fig.get_figwidth() * fig.dpi >= 1000
    axes = fig.get_axes()
    assert len(axes) == 2 and all(ax.get_xscale() == "log" and ax.get_yscale() == "log"
                                  for ax in axes)
    assert fig._suptitle is not None and fig._suptitle.get_text()


@pytest.mark.parametrize("keep_X_rows", [None, 40])
def test_the_gram_projection_never_holds_n_times_P_numbers(keep_X_rows):
    # a wide layer makes P large against n: J alone would be n P numbers, the Gram path holds
    # O(n^2 + n width) (tracemalloc counts NumPy's buffers, so this is not a timing claim)
    net, X, G = bench.problem([60, 200, 200, 3], 80)
    keep_X = None if keep_X_rows is None else X[:keep_X_rows]
    n = X.shape[0] if keep_X is None else keep_X_rows
    for project in (fixes.project, fast.project):
        peak = bench.peak_bytes(lambda: project(net, X, G, keep=[0], keep_X=keep_X))
        assert peak < 0.5 * bench.dense_bytes(net, n)
    assert bench.peak_bytes(lambda: bench.dense_project(net, X, G, keep_X=keep_X)) > bench.dense_bytes(net, n)


def test_committed_projection_cost_data_backs_the_readme():
    """benchmarks/README.md's sentence under projection_cost.png, on the committed measurements."""
    d = projection_cost_data(load_projection_cost(), "float64")
    measured = ~np.isnan(d["dense_s"])
    assert measured.all() and list(d["n"]) == [16, 32, 64, 128, 256]
    assert np.all(d["gram_s"] < d["dense_s"])
    assert d["dense_s"][-1] / d["gram_s"][-1] > 10
    assert d["dense_peak_bytes"][-1] / d["gram_peak_bytes"][-1] > 100
    assert np.all(d["gram_peak_bytes"] < d["dense_bytes_estimate"])


def readme():
    """benchmarks/README.md, the performance write-up, its whitespace collapsed."""
    from pathlib import Path
    return " ".join((Path(__file__).resolve().parents[1] / "benchmarks" / "README.md").read_text().split())


def test_committed_bench_run_backs_the_readme_performance_claims():
    """The performance write-up's paragraphs, number by number, on the committed run (a
    measurement, not a live timing)."""
    data = load_projection_cost()
    results = {r["dtype"]: r for r in data["results"]}
    assert set(results) == {"float64", "float32"}
    text = readme()
    f64, f32 = results["float64"], results["float32"]
    for r in results.values():
        assert r["batch"] == 256 and r["sizes"] == bench.SIZES
        assert all(t["faults"] == 0 for t in r["kept"]["timings"].values())     # "none do"
    assert f64["timings"]["gradient"]["faults"] == 0                            # "no page"
    assert f64["timings"]["reference_gradient"]["faults"] > 1000                # "thousands"
    mib = {k: f"{v / 2**20:.2f} MiB" for k, v in f64["peak_bytes"].items()}
    assert f"peaks at {mib['gradient']}, `fast.project` at {mib['project']}" in text
    assert f"({f64['project_peak_over_gradient']:.2f} times the gradient)" in text
    assert f"{f64['peak_bytes']['reference_gradient'] / 2**20:.1f} MiB for the reference gradient" in text
    k64, k32 = f64["kept"], f32["kept"]
    assert (f"the fast gradient costs {k64['gradient_over_products']:.2f} (float64) and "
            f"{k32['gradient_over_products']:.2f} (float32) times its matmuls, and the projection "
            f"{k64['project_over_gradient']:.2f} and {k32['project_over_gradient']:.2f} times the "
            f"gradient; the reference's gradient is {k64['reference_gradient_over_gradient']:.2f} and "
            f"{k32['reference_gradient_over_gradient']:.2f} times slower, its projection "
            f"{k64['reference_project_over_project']:.2f} and "
            f"{k32['reference_project_over_project']:.2f} times") in text
    memory = data["memory"]
    rows = {r["m"]: r for r in memory["rows"]}
    share = rows[512]["parts_s"]["factorise"] / sum(rows[512]["parts_s"].values())
    g = memory["growth"]
    assert (f"costs {rows[512]['project_s']:.2f} s a step at m = 512 (2,560 constraints) and "
            f"{rows[819]['project_s']:.2f} s at m = 819 (4,095), growing as constraints^"
            f"{g['project']:.2f} over the three largest memories: the factorisation (one Cholesky of the "
            f"shifted Gram, n^3/3, whose success certifies the rank) grows as n^{g['factorise']:.2f} "
            f"and is {share:.0%} of the step at "
            f"2,560 constraints; the Gram's products grow as n^{g['gram']:.2f}") in text


def test_the_reference_gradient_holds_every_stage_the_fast_one_half_or_less():
    # tracemalloc counts NumPy's buffers: a memory claim, not a timing one
    net, X, G = bench.problem(bench.SIZES, bench.BATCH)
    reference = bench.peak_bytes(lambda: net.gradient(X, G))
    ours = bench.peak_bytes(lambda: fast.gradient(net, X, G))
    assert ours <= 0.5 * reference
    r = next(r for r in load_projection_cost()["results"] if r["dtype"] == "float64")
    assert r["peak_bytes"]["gradient"] <= 0.5 * r["peak_bytes"]["reference_gradient"]


def test_keep_freed_memory_says_false_where_there_is_no_mallopt(monkeypatch):
    class NoMallopt:                                     # a C library without mallopt (macOS)
        def __init__(self, name):
            pass
    monkeypatch.setattr(bench.ctypes, "CDLL", NoMallopt)
    assert bench.keep_freed_memory() is False


def test_the_readme_gives_the_benchs_own_allocator_settings():
    assert f"GLIBC_TUNABLES={bench.KEEP_MEMORY['GLIBC_TUNABLES']}" in readme()


def test_the_memory_sweep_reports_every_part_and_its_growth():
    memory = bench.bench_memory("float64", rows=(4, 8, 12), repeats=1, isolate=False,
                                log=lambda message: None)
    assert [r["constraints"] for r in memory["rows"]] == [20, 40, 60]
    for r in memory["rows"]:
        assert set(r["parts_s"]) == set(bench.MEMORY_PARTS)
        assert r["project_s"] > 0 and r["peak_bytes"] > 0 and all(v >= 0 for v in r["parts_s"].values())
    assert set(memory["growth"]) == {"project", "peak", *bench.MEMORY_PARTS}
    text = "\n".join(bench.format_memory(memory))
    assert "where the time goes" in text and "constraints^k" in text


def test_growth_fits_the_exponent_of_a_power_law():
    rows = [{"constraints": n, "project_s": 2e-9 * n ** 3, "peak_bytes": 8 * n ** 2,
             "parts_s": {"gram": 1e-8 * n ** 2, "solve": 1e-9 * n ** 3}} for n in (100, 200, 400, 800)]
    k = bench.growth(rows)
    assert k == pytest.approx({"project": 3.0, "peak": 2.0, "gram": 2.0, "solve": 3.0}, abs=1e-12)


def test_memory_parts_are_the_projection_itself():
    for m in (3, 6, 40):                       # ill- and well-conditioned Grams: both ways of refining
        net, X, G, keep_X = bench.memory_problem(m, sizes=[5, 4, 4, 6], batch=9)
        D = bench.memory_parts(net, X, G, keep_X)[0]
        same = fast.project(net, X, G, keep=bench.MEMORY_KEEP, keep_X=keep_X)
        assert all(np.array_equal(D[k], same[k]) for k in same)

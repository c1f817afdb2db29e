"""The emulated machines of CI's matrix: one line per configuration, its name, a tab, and the
environment variables that select it (``VAR=VALUE`` separated by spaces).

    python .ci/machines.py            the configurations this CPU can emulate
    python .ci/machines.py --which    what runs in this process (after the variables took effect)

numpy's SIMD dispatch is cut with NPY_DISABLE_CPU_FEATURES, naming only features this CPU has
(numpy refuses to disable one it lacks, and cannot disable its baseline): to AVX2 (every
AVX-512 feature off) and to numpy's baseline (every dispatched feature off). OpenBLAS's kernel
is chosen with OPENBLAS_CORETYPE: Prescott (SSE3), Haswell (AVX2), and SkylakeX where the CPU has
AVX-512. The BLAS runs 1 and 2 threads. ``--which`` reports the kernel OpenBLAS chose
(threadpoolctl) and numpy's dispatch, so that the log shows each configuration did what it says.
"""
import sys


def _cpu():
    """(numpy's dispatched features, which of all features this CPU has)."""
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    except ImportError:                                         # numpy 1.x
        from numpy.core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    return __cpu_dispatch__, __cpu_features__


def avx512(name):
    return "AVX512" in name or name == "X86_V4"


def machines():
    __cpu_dispatch__, __cpu_features__ = _cpu()
    found = [name for name in __cpu_dispatch__ if __cpu_features__.get(name)]
    rows = []
    above_avx2 = [name for name in found if avx512(name)]
    if above_avx2:
        rows.append(("numpy SIMD cut to AVX2", f"NPY_DISABLE_CPU_FEATURES={','.join(above_avx2)}"))
    if found:
        rows.append(("numpy SIMD cut to its baseline", f"NPY_DISABLE_CPU_FEATURES={','.join(found)}"))
    rows.append(("OpenBLAS Prescott kernel", "OPENBLAS_CORETYPE=Prescott"))
    rows.append(("OpenBLAS Haswell kernel", "OPENBLAS_CORETYPE=Haswell"))
    if __cpu_features__.get("AVX512F"):
        rows.append(("OpenBLAS SkylakeX kernel", "OPENBLAS_CORETYPE=SkylakeX"))
    for threads in (1, 2):
        rows.append((f"{threads} BLAS thread{'s' if threads > 1 else ''}",
                     f"OPENBLAS_NUM_THREADS={threads} OMP_NUM_THREADS={threads}"))
    return rows


def which():
    import numpy as np
    import threadpoolctl

    __cpu_dispatch__, __cpu_features__ = _cpu()

    blas = [(p.get("internal_api"), p.get("architecture"), p.get("num_threads"))
            for p in threadpoolctl.threadpool_info() if p.get("user_api") == "blas"]
    simd = [name for name in __cpu_dispatch__ if __cpu_features__.get(name)]
    return f"numpy {np.__version__}, dispatch {simd or 'baseline only'}, BLAS {blas}"


if __name__ == "__main__":
    if sys.argv[1:] == ["--which"]:
        print(which())
    else:
        for name, variables in machines():
            print(f"{name}\t{variables}")

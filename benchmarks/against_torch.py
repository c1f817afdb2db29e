"""mlp-ref's gradient beside PyTorch's autograd on the CPU: same weights, same X, same G, same dtype.

Not part of the package or its tests: it needs PyTorch (the ``frameworks`` extra), which mlp-ref
never imports. With mlp-ref installed:

    python benchmarks/against_torch.py                 # glibc's default allocator
    python benchmarks/against_torch.py --keep-memory   # glibc keeping freed memory

What is compared: sum_i G_i . dO_i/dtheta for the output gradient G of ``python -m mlp_ref
bench`` ([784, 512, 512, 10], tanh, batch 256): ``mlp_ref.fast.gradient(net, X, G)`` against
torch's ``forward().backward(G)`` (parameter gradients only, as ``torch.nn.Linear`` computes
them: ``addmm``, then ``tanh``), and the reference ``net.gradient(X, G)`` beside them. The
gradients are first checked equal (1e-12 in float64), so the times compare the same computation.
Timing: the three calls interleaved in one process, one call of each per round, ``--repeats``
rounds after a warm-up, the median reported; the whole repeated in ``--processes`` fresh
processes, and the ratio fast / torch reported per process (a process that caught the machine
slow slows both) and as the median over processes.
"""
import argparse

import numpy as np
import torch

from mlp_ref import fast
from mlp_ref.fast import bench


def torch_gradient(net, X, G, dtype):
    """A function computing torch's gradient of sum(G * out) on a copy of net's weights; and its
    parameters (whose .grad it fills)."""
    params = [torch.tensor(net.params[f"{kind}{l}"], dtype=dtype, requires_grad=True)
              for l in range(1, net.depth + 1) for kind in ("W", "b")]
    Xt, Gt = torch.tensor(X, dtype=dtype), torch.tensor(G, dtype=dtype)

    def gradient():
        for p in params:
            p.grad = None
        a = Xt
        for l in range(net.depth):
            a = torch.addmm(params[2 * l + 1], a, params[2 * l])     # a @ W + b, fused
            if l < net.depth - 1:
                a = torch.tanh(a)
        a.backward(Gt)                       # sum_i G_i . dO_i/dtheta, as net.gradient
    return gradient, params


def check_same_gradient(name):
    """torch's gradient and ours, on the same weights: equal to the dtype's roundoff."""
    net, X, G = bench.problem(bench.SIZES, bench.BATCH, name)
    gradient, params = torch_gradient(net, X, G, getattr(torch, name))
    gradient()
    ours = fast.gradient(net, X, G)
    tol = 1e-12 if name == "float64" else 1e-5
    for p, key in zip(params, net.params):
        err = np.abs(p.grad.numpy() - ours[key]).max() / np.abs(ours[key]).max()
        assert err < tol, f"{name} {key}: the two gradients differ by {err:.2g}"


def time_in_one_process(name, repeats, keep_memory):
    """fast.gradient, torch's gradient and net.gradient, interleaved, in this process."""
    if keep_memory:
        bench.keep_freed_memory()
    net, X, G = bench.problem(bench.SIZES, bench.BATCH, name)
    calls = {"fast": lambda: fast.gradient(net, X, G),
             "torch": torch_gradient(net, X, G, getattr(torch, name))[0],
             "reference": lambda: net.gradient(X, G)}
    return {who: t["median_s"] for who, t in bench.time_interleaved(calls, repeats).items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=25, help="timed rounds per process")
    parser.add_argument("--processes", type=int, default=3, help="fresh processes per dtype")
    parser.add_argument("--keep-memory", action="store_true",
                        help="call mlp_ref.fast.bench.keep_freed_memory() first (glibc only)")
    args = parser.parse_args()
    print(f"torch {torch.__version__} ({torch.get_num_threads()} threads), "
          f"NumPy {np.__version__}; {bench.machine_info()['blas']}")
    print(f"allocator: {'glibc keeping freed memory' if args.keep_memory else 'default'}; "
          f"fast.gradient, torch and the reference interleaved in one process, "
          f"{args.processes} processes per dtype")
    for name in ("float64", "float32"):
        check_same_gradient(name)
        runs = [bench._call(True, time_in_one_process, name, args.repeats, args.keep_memory)
                for _ in range(args.processes)]
        for i, run in enumerate(runs):
            print(f"{name} process {i}: fast {run['fast'] * 1e3:6.2f} ms, torch "
                  f"{run['torch'] * 1e3:6.2f} ms, reference {run['reference'] * 1e3:6.2f} ms; "
                  f"fast / torch = {run['fast'] / run['torch']:.2f}")
        ratios = [run["fast"] / run["torch"] for run in runs]
        print(f"{name}: fast / torch, median over processes = {np.median(ratios):.2f} "
              f"(range {min(ratios):.2f} .. {max(ratios):.2f})")


if __name__ == "__main__":
    main()

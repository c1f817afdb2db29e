"""One training step of mlp-ref beside the same step in PyTorch, on the CPU, same shapes and dtype.

Not part of the package or its tests: it needs PyTorch (``pip install torch``), which mlp-ref
never imports. With mlp-ref installed (the README's first command):

    python benchmarks/against_torch.py                 # glibc's default allocator
    python benchmarks/against_torch.py --keep-memory   # both with glibc keeping freed memory

Both steps start from the same weights, the same X and the same output gradient G (as in
``python -m mlp_ref bench``: [784, 512, 512, 10], tanh, batch 256), and do the same work:
forward, backward with parameter gradients (no gradient for X), and theta <- theta - lr * grad.
The two gradients are first checked equal, so that the times compare the same computation.
Each framework is timed in fresh processes of its own, alternating; each process then times
NumPy's matrix products of one step (the bench's floor), a probe of how fast the machine ran for
it, since another tenant or the clock can slow one process and not the next. Reported: the
median step of each framework, and the ratio of their steps over their processes' floors.
"""
import argparse

import numpy as np
import torch

from mlp_ref import bench

LR = 1e-3


def torch_step(net, X, G, dtype):
    """A function doing one torch training step on a copy of net's weights, and its parameters."""
    params = [torch.tensor(net.params[f"{kind}{l}"], dtype=dtype, requires_grad=True)
              for l in range(1, net.depth + 1) for kind in ("W", "b")]
    Xt, Gt = torch.tensor(X, dtype=dtype), torch.tensor(G, dtype=dtype)

    def forward():
        a = Xt
        for l in range(net.depth):
            W, b = params[2 * l], params[2 * l + 1]
            a = torch.addmm(b, a, W)                    # a @ W + b, fused, as torch.nn.Linear does
            if l < net.depth - 1:
                a = torch.tanh(a)
        return a

    def step():
        forward().backward(Gt)                          # sum_i G_i . dO_i/dtheta, like net.gradient
        with torch.no_grad():
            for p in params:
                p.sub_(p.grad, alpha=LR)                # theta <- theta - lr * grad, in place
                p.grad = None
    return step, params, forward


def time_step(who, name, repeats, keep_memory):
    """One framework's step ("mlp-ref" or "torch") in a loop, then NumPy's matmuls of a step
    (the bench's floor: a probe of how fast the machine ran for this process), in this process."""
    if keep_memory:
        bench.keep_freed_memory()
    net, X, G = bench.problem(bench.SIZES, bench.BATCH, name)
    if who == "torch":
        step = torch_step(net, X, G, getattr(torch, name))[0]
    else:
        def step():
            net.step(net.gradient(X, G), LR)
    timings = bench.time_interleaved({"step": step}, repeats)
    bench._floor_after(net, X, G, timings, repeats)     # notes floor_s, as the bench does
    return timings["step"]


def check_same_gradient(name):
    """torch's gradient and ours, on the same weights: equal to the dtype's roundoff."""
    net, X, G = bench.problem(bench.SIZES, bench.BATCH, name)
    params, forward = torch_step(net, X, G, getattr(torch, name))[1:]
    forward().backward(torch.tensor(G))
    ours = net.gradient(X, G)
    tol = 1e-12 if name == "float64" else 1e-5
    for p, key in zip(params, net.params):
        err = np.abs(p.grad.numpy() - ours[key]).max() / np.abs(ours[key]).max()
        assert err < tol, f"{name} {key}: the two gradients differ by {err:.2g}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20, help="timed steps per process")
    parser.add_argument("--rounds", type=int, default=5, help="processes per framework")
    parser.add_argument("--keep-memory", action="store_true",
                        help="call mlp_ref.bench.keep_freed_memory() first (glibc only)")
    args = parser.parse_args()
    print(f"torch {torch.__version__} ({torch.get_num_threads()} threads), "
          f"NumPy {np.__version__}; {bench.machine_info()['blas']}")
    print(f"allocator: {'glibc keeping freed memory' if args.keep_memory else 'default'}; "
          f"each framework in processes of its own (two thread pools sharing the cores would "
          f"slow each other), {args.rounds} of each, alternating")
    for name in ("float64", "float32"):
        check_same_gradient(name)
        runs = {"mlp-ref": [], "torch": []}
        for _ in range(args.rounds):
            for who in runs:
                runs[who].append(bench._call(True, time_step, who, name, args.repeats,
                                             args.keep_memory))
        ms = {who: 1e3 * np.median([t["median_s"] for t in ts]) for who, ts in runs.items()}
        faults = {who: int(np.median([t["faults"] for t in ts])) for who, ts in runs.items()}
        # each process's step over the matmuls timed in it, then the median over processes
        relative = {who: np.median([t["median_s"] / t["floor_s"] for t in ts])
                    for who, ts in runs.items()}
        print(f"{name}: mlp-ref {ms['mlp-ref']:6.2f} ms ({faults['mlp-ref']} faults), "
              f"torch {ms['torch']:6.2f} ms ({faults['torch']} faults); over the matmuls of "
              f"their own processes: mlp-ref {relative['mlp-ref']:.2f}, torch {relative['torch']:.2f}: "
              f"mlp-ref / torch = {relative['mlp-ref'] / relative['torch']:.2f}")


if __name__ == "__main__":
    main()

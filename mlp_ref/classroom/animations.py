"""The animations: ``python -m mlp_ref animate [--out DIR]`` writes each as a GIF, byte-identical
from run to run (no time stamp in a GIF; the same measurement drawn the same way).

Each entry of ``ANIMATIONS`` maps a file name to the measurement it moves and its drawing in
``plots.motion``, which draws the first frame with the figures' own plot functions:

    backprop.gif          backprop of G = [0, -1] on the seed network, stage by stage: out1's zero
                          column travels down the output layer, then the shared layer lights up
                          (tutorials 01 and 02)
    projection_step.gif   one step of naive, projected and restored on out1's curved level set
                          (tutorial 05)
    continual_steps.gif   the continual-learning run step by step: old and new accuracy per fix
                          (tutorial 08)

The measurements are those of ``mlp_ref.classroom.figures`` (computed once per process), so an animation
shows the very numbers its figure shows. matplotlib is imported only when one is drawn.
"""
from __future__ import annotations

import os
import time

import numpy as np

from ..files import atomic
from ..measurements import motion
from ..setups import OUT1
from . import figures

#: The frame rate's pieces: the time each frame is shown, and how long the last one stays
#: before the loop starts again (milliseconds).
FRAME_MS = {"backprop.gif": 900, "projection_step.gif": 450, "continual_steps.gif": 350}
HOLD_MS = 2500
#: The GIFs' resolution: 80 dpi makes the figures' 11-12.5 inch widths 880-1000 pixels.
DPI = 80


def stage_captions(result):
    """What each backward stage of ``question.backprop_stages``'s result shows, in a few words:
    in the output layer, whether out1's column is exactly 0; below it, how many entries the
    out2-only signal reaches (the shared layer lights up)."""
    K = len(result["G"])
    layers = [int(name.lstrip("adzWb")) for name in result["backward"] if name != "dout"]
    top = max(layers)
    captions = {}
    for name, value in result["backward"].items():
        in_output_layer = name == "dout" or (name[-1].isdigit() and int(name.lstrip("adzWb")) == top
                                            and not name.startswith("da"))
        if in_output_layer and value.shape[-1] == K:
            zero = bool(np.all(value[..., OUT1] == 0.0))
            captions[name] = "out1's column is exactly 0" if zero else "out1's column is not 0"
        else:
            reached = int(np.count_nonzero(value))
            captions[name] = (f"{reached} of {value.size} entries non-zero: the shared layer "
                              "lights up" if name != "da0" else
                              f"{reached} of {value.size} entries non-zero, down to the inputs")
    return captions


def backprop():
    """(fig, update, n_frames) of backprop.gif: the seed network's stages (``figures.seed_stages``)."""
    from ..plots import motion as drawing
    result = figures.seed_stages()
    fig, update, n, _ = drawing.backprop_stages_frames(
        result, stage_captions(result), "Backprop of G = [0, \u22121] on the seed network",
        "out1's column is 0 down to dW2 and db2; from da1 on, out2's signal is in every hidden unit")
    return fig, update, n


def projection_step():
    """(fig, update, n_frames) of projection_step.gif (``figures.geometry``)."""
    from ..plots import motion as drawing
    geometry = figures.geometry()
    return drawing.projection_step_frames(geometry, motion.projection_step_frames(geometry))


def continual_steps():
    """(fig, update, n_frames) of continual_steps.gif (``figures.continual_run``)."""
    from ..plots import motion as drawing
    return drawing.continual_steps_frames(figures.continual_run())


#: file name -> the function that draws it, in the order ``write_all`` writes them.
ANIMATIONS = {"backprop.gif": backprop, "projection_step.gif": projection_step,
              "continual_steps.gif": continual_steps}


def gif(name):
    """The bytes of animation ``name`` (a key of ANIMATIONS) and its frame count."""
    from ..plots import motion as drawing
    fig, update, n = ANIMATIONS[name]()
    durations = [FRAME_MS[name]] * (n - 1) + [HOLD_MS]
    return drawing.gif_bytes(fig, update, n, durations, DPI), n


def write_all(out="figures", names=None, log=print):
    """Write every animation (or those in ``names``) into the folder ``out``; return the paths.
    Each file is written whole or not at all (``atomic.write_atomically``)."""
    names = list(ANIMATIONS) if names is None else list(names)
    unknown = [n for n in names if n not in ANIMATIONS]
    if unknown:
        raise ValueError(f"names: unknown animations {unknown}; known: {list(ANIMATIONS)}")
    targets = [os.path.join(out, name) for name in names]
    figures.ready(out, targets)
    paths = []
    for i, (name, path) in enumerate(zip(names, targets), 1):
        t0 = time.perf_counter()
        data, n = gif(name)
        path = atomic.write_atomically("out", path, lambda f: f.write(data))
        paths.append(path)
        log(f"[{i}/{len(names)}] {path}  ({n} frames, {len(data) // 1024} KiB, "
            f"{time.perf_counter() - t0:.1f} s)")
    return paths

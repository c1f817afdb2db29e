"""The classroom's tools, the top of the house: they draw, write and grade what the layers below
compute, and nothing below imports them. ``python -m mlp_ref COMMAND`` reaches each through ``cli``.

    cli          the command line (``mlp-ref`` and ``python -m mlp_ref``)
    figures      ``figures``: each PNG as a measurement and its plot, written into ``figures/``
    report       ``table`` and the tutorials' tables: the measurements as text
    tutorial     what lets a tutorial run as a notebook and as a script (``run_headless``, ``--step``)
    animations   ``animate``: the GIFs
    explorable   ``explore``: the live window and the page that computes in the browser
    deck         ``slides``: the 90-minute class's PDF and its speaker notes
    grading      ``check``: the autograder of ``tutorials/exercises``
"""

"""The boundary: what the lesson's functions refuse, said once at the door.

The lesson (``network``, ``jacobian``, ``fixes``, ...) holds the formulas and declares beside each
public function what it takes; this package holds the checks those declarations name and imports
nothing of the lesson but ``network`` (for ``model_checks``):

    checks        the door (``checked``), the typed errors ``BadValue`` and ``BadType`` whose
                  ``argument`` names the refused argument, and the checks of arrays and numbers
    model_checks  the checks that must know what a model is (a net, a keep list's ref, GPM's bases)
    diagnosis     after a failure only: which argument a result that is not finite is blamed on,
                  why ``restore`` stopped
    argtypes      the command lines' argparse types, with the same kind of message
"""

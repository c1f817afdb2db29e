"""The boundary: what the lesson's functions refuse, said once at the door.

The lesson (``network``, ``jacobian``, ``fixes``, ...) holds the formulas; this package holds what
stands around them and imports nothing of the lesson but ``network`` (for ``model_checks``):

    checks        the typed errors ``BadValue`` (a ValueError) and ``BadType`` (a TypeError), whose
                  ``argument`` names the refused argument, and the checks of arrays and numbers
    model_checks  the checks that must know what a model is (a net, a rule's X and G, a keep list)
    diagnosis     after a failure only: which argument an overflow is blamed on, whether a
                  projection held J D = 0 to its stated accuracy, why ``restore`` stopped
    argtypes      the command lines' argparse types, with the same kind of message
"""

"""The boundary: what the lesson's functions refuse, said once at the door. The lesson declares beside each
public function what it takes; this package holds the checks those declarations name, and imports nothing of
the lesson but ``network`` (for ``model_checks``):

    checks        the door ``checked``, the errors ``BadValue`` / ``BadType`` (``exc.argument``), numbers, arrays
    model_checks  the checks that must know what a model is
    diagnosis     after a failure only: whom a result that is not finite blames, why ``restore`` stopped
    argtypes      the command lines' argparse types, with the same kind of message
"""

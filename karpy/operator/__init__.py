"""The top layer: the ``karpy`` command line, the composition root and the process supervisor."""

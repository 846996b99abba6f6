"""``python -m karpy`` runs the ``karpy`` command line."""

from karpy.operator.main import main

raise SystemExit(main())

"""``python -m armillary`` runs the command line (see :mod:`armillary.cli`)."""

from .cli import main

raise SystemExit(main())

"""``python -m ringgnn``: the same as the ``ringgnn`` command."""

from ringgnn.cli import main

raise SystemExit(main())

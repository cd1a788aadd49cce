"""``python -m tunekit``: the ``tunekit`` command."""

from tunekit._cli.main import main

raise SystemExit(main())

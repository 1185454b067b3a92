"""``python -m kubespot``."""

from .cli import main

raise SystemExit(main())

"""The provisioner's pure core: requirements algebra, fit and the scheduling simulation (no I/O)."""

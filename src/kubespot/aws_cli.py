"""``kubespot aws``: AWS set-up for the controller (being written)."""

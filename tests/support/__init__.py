"""Helpers shared by tests in any directory (``pythonpath = ["tests"]`` in pyproject.toml puts this
package on the import path): ``fake_kube``, the in-memory stand-in for ``KubeClient``; ``clocks``;
``http_receiver``, a local HTTP endpoint for tests of outgoing calls."""

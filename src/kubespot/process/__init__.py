"""What the agent and the operator do alike as long-running processes: the command around them
(``command``: settings and outgoing targets checked, logs set up, run until a signal), endpoints,
signals, task supervision, the checks every /healthz ends with and an orderly shutdown
(``supervise``), and the garbage collector's settings once start-up is done (``collector``)."""

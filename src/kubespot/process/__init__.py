"""What the agent and the operator do alike as long-running processes: endpoints, signals, task
supervision and an orderly shutdown (``supervise``), and the garbage collector's settings once
start-up is done (``collector``)."""

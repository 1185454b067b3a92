"""Helpers shared by tests in any directory (``pythonpath = ["tests"]`` in pyproject.toml puts this
package on the import path): ``fake_kube``, the in-memory stand-in for ``KubeClient``; ``fake_aws``,
fakes of the AWS adapters the response actions drive; ``clocks``; ``events``, plausible interruption
events; ``node_handler``, a node handler on fakes; ``http_receiver``, a local HTTP endpoint for tests
of outgoing calls; ``notifiers``, a notifier run as the agent runs it; ``moto_sqs`` and ``moto_asg``,
queues and Auto Scaling groups on moto; ``kubespot_process``, kubespot processes as the end-to-end
suites start them; ``imports``, what a fresh interpreter loads; ``sandbox``; ``benchmarks``;
``catalog``, instance types for the scheduling tests; ``kubesim_http``, one raw call to a kubesim."""

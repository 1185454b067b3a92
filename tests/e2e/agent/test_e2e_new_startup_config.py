"""Start-up: an invalid or missing setting stops the agent with exit code 2 and a message naming the
setting; a valid configuration is printed at start-up with its secrets redacted."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import orjson
import pytest
from agent_world import agent_world

pytestmark = pytest.mark.slow

SECRET_URL = "http://127.0.0.1:9/hooks/T000/B000/s3cr3t-webhook-token"
SECRET_HEADER = "Bearer hunter2-header-secret"

#: (id, extra env, fragments the message must contain)
BAD: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
    (
        "taint-effect",
        {"KUBESPOT_NODE_ACTIONS_TAINT_EFFECT": "Sometimes"},
        ("taint_effect", "KUBESPOT_NODE_ACTIONS_TAINT_EFFECT", "Sometimes"),
    ),
    (
        "nth-grace-period",
        {"NODE_TERMINATION_GRACE_PERIOD": "abc"},
        ("node_termination_grace_period", "NODE_TERMINATION_GRACE_PERIOD", "abc"),
    ),
    ("missing-node-name", {"KUBESPOT_NODE_NAME": ""}, ("node_name", "KUBESPOT_NODE_NAME")),
    # A template that cannot be used no longer stops the agent (it is logged and NTH's default message
    # is sent: test_e2e_nth_webhook_templates.py); a template file that cannot be read still does.
    (
        "webhook-template-file-missing",
        {"WEBHOOK_URL": SECRET_URL, "WEBHOOK_TEMPLATE_FILE": "/nonexistent/template.json"},
        ("webhook.template_file", "/nonexistent/template.json"),
    ),
    (
        "no-cluster-configuration",
        {"KUBESPOT_KUBECONFIG": "/nonexistent/kubeconfig"},
        ("no usable cluster configuration", "/nonexistent/kubeconfig"),
    ),
    (
        "pdb-deadline-action",
        {"KUBESPOT_DRAIN_PDB_DEADLINE_ACTION": "shrug"},
        ("pdb_deadline_action", "KUBESPOT_DRAIN_PDB_DEADLINE_ACTION"),
    ),
]


@pytest.mark.parametrize(("env", "fragments"), [(e, f) for _, e, f in BAD], ids=[i for i, _, _ in BAD])
async def test_invalid_setting_exits_2_naming_it(
    tmp_path: Path, env: dict[str, Any], fragments: tuple[str, ...]
) -> None:
    async with agent_world(tmp=tmp_path, settle=False, spares=0) as world:
        code, output = await world.run_agent_to_exit(**env)
    assert code == 2, output
    for fragment in fragments:
        assert fragment in output, f"{fragment!r} not in:\n{output}"
    assert "Traceback" not in output, output
    # Secrets are not echoed even when the configuration around them is wrong.
    assert "s3cr3t-webhook-token" not in output, output


async def test_effective_configuration_is_printed_with_secrets_redacted(tmp_path: Path) -> None:
    async with agent_world(tmp=tmp_path, settle=False, spares=0) as world:
        agent = await world.start_agent(
            WEBHOOK_URL=SECRET_URL,
            WEBHOOK_HEADERS=orjson.dumps({"Authorization": SECRET_HEADER}).decode(),
            KUBESPOT_NODE_ACTIONS_TAINT_EFFECT="PreferNoSchedule",
        )
        code = await agent.stop()
    text = agent.text()
    assert code == 0, text
    assert "s3cr3t-webhook-token" not in text and "hunter2" not in text, text
    lines = [line for line in agent.lines() if "effective configuration" in str(line.get("message"))]
    assert len(lines) == 1, text
    message = str(lines[0]["message"])
    assert "<redacted>" in message
    config: dict[str, Any] = orjson.loads(message.split(":", 1)[1])
    assert config["node_name"] == "spot-1"
    assert config["webhook"]["url"] == "<redacted>"
    assert config["webhook"]["headers"] == {"Authorization": "<redacted>"}
    assert config["node_actions"]["taint_effect"] == "PreferNoSchedule"


async def test_a_metrics_port_in_use_exits_1_with_a_message(tmp_path: Path) -> None:
    """Another process holds the metrics port: the agent says so and exits 1, no traceback."""
    with socket.socket() as holder:
        holder.bind(("", 0))  # every address: the agent binds its own listen host
        holder.listen()
        port = holder.getsockname()[1]
        async with agent_world(tmp=tmp_path, settle=False, spares=0) as world:
            code, output = await world.run_agent_to_exit(
                KUBESPOT_OBSERVABILITY_ENABLE_PROMETHEUS_SERVER="true",
                KUBESPOT_OBSERVABILITY_PROMETHEUS_SERVER_PORT=str(port),
            )
    assert code == 1, output
    assert "cannot start the metrics or probe server" in output, output
    assert "Traceback" not in output, output

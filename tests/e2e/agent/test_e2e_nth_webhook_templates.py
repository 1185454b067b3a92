"""NTH webhook templates the review found stopping the agent (nth-compat.md, gap 2) now start it and
render: NTH's documented ``range $key, $value := .NodeLabels`` (aws-node-termination-handler PR
#382), ``index``, ``eq``, ``printf``, ``with``, ``.StartTime.Format``, sprig's ``date``, and every
field NTH gives its template (``monitor.InterruptionEvent`` + ``ec2metadata.NodeMetadata``:
NodeLabels, Pods, InstanceType, AvailabilityZone, Region, LocalIP, AccountId, InstanceLifeCycle,
Monitor, ProviderID...). Before, ``kubespot agent`` exited 2 with each of them (a crash loop on every
node). A template using a construct kubespot does not offer is named in the log and NTH's default
message is sent instead.

One agent carries all the templates: NTH's WEBHOOK_TEMPLATE plus one named notification target per
template, each posting to its own path of a local receiver.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from agent_world import INSTANCE, NODE, agent_world, has_log, web
from nth_support import WebhookReceiver, check, spot_event_id, spot_itn

from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow

#: NTH PR #382's "formatted" example, verbatim.
NTH_LABELS_TEMPLATE = (
    '{"text":"[NTH][Instance Interruption] EventID: {{ .EventID }} - Kind: {{ .Kind }} - '
    "{{ range $key, $value := .NodeLabels }}{{ $key }}:{{ $value }} {{ end }} - "
    'Description: {{ .Description }} - Start Time: {{ .StartTime }}"}'
)

TEMPLATES = {
    # (Not `index .Pods 0`: NTH validates its template with empty data, where that fails; so here.)
    "index": '{"lifecycle":"{{ index .NodeLabels "lifecycle" }}","cap":"{{ index .NodeLabels "nope" }}"}',
    "eq": '{"spot":"{{ if eq .Kind "SPOT_ITN" }}yes{{ else }}no{{ end }}"}',
    "printf": '{"t":"{{ printf "%s on %s" .Kind .NodeName }}"}',
    "with": '{"lc":"{{ with .NodeLabels.lifecycle }}{{ . }}{{ else }}none{{ end }}"}',
    "format": '{"at":"{{ .StartTime.Format "2006-01-02T15:04:05Z07:00" }}"}',
    "date": '{"d":"{{ date "2006-01-02" .StartTime }}","up":"{{ .Kind | lower }}"}',
    "fields": (
        '{"InstanceType":"{{ .InstanceType }}","AvailabilityZone":"{{ .AvailabilityZone }}",'
        '"Region":"{{ .Region }}","LocalIP":"{{ .LocalIP }}","AccountId":"{{ .AccountId }}",'
        '"InstanceLifeCycle":"{{ .InstanceLifeCycle }}","Monitor":"{{ .Monitor }}",'
        '"ProviderID":"{{ .ProviderID }}","InstanceID":"{{ .InstanceID }}",'
        '"ASG":"{{ .AutoScalingGroupName }}","PublicIP":"{{ .PublicIP }}",'
        '"Pods":{{ toJson .Pods }},"NodeLabels":{{ toJson .NodeLabels }}}'
    ),
}


async def test_nth_templates_start_the_agent_and_render_nth_fields(tmp_path: Path) -> None:
    async with WebhookReceiver() as receiver, agent_world(web("web", 2), tmp=tmp_path) as world:
        env = {"WEBHOOK_URL": receiver.url("/webhook"), "WEBHOOK_TEMPLATE": NTH_LABELS_TEMPLATE}
        for name, template in TEMPLATES.items():
            prefix = f"KUBESPOT_NOTIFY_{name.upper()}_"
            env |= {
                prefix + "URL": receiver.url(f"/{name}"),
                prefix + "FORMAT": "template",
                prefix + "TEMPLATE": template,
                prefix + "STAGES": "started",
            }
        agent = await world.start_agent(**env)
        itn = spot_itn(world, lead_seconds=15)

        await until(check(lambda: len(receiver.posts()) == 1 + len(TEMPLATES)), within=25)
        by_path = {p.target: p.json() for p in receiver.posts()}

        text = by_path["/webhook"]["text"]
        assert text.startswith(
            f"[NTH][Instance Interruption] EventID: {spot_event_id(itn)} - Kind: SPOT_ITN - "
        )
        assert "karpenter.sh/capacity-type:spot " in text and "lifecycle:Ec2Spot " in text, text

        assert by_path["/index"]["lifecycle"] == "Ec2Spot"
        assert by_path["/index"]["cap"] == ""  # index of an absent key: the zero value
        assert by_path["/eq"] == {"spot": "yes"}
        assert by_path["/printf"] == {"t": f"SPOT_ITN on {NODE}"}
        assert by_path["/with"] == {"lc": "Ec2Spot"}
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", by_path["/format"]["at"])
        assert by_path["/date"]["d"] == by_path["/format"]["at"][:10]
        assert by_path["/date"]["up"] == "spot_itn"

        fields = by_path["/fields"]
        assert fields["InstanceType"] == "m5.large"
        assert fields["AvailabilityZone"] == "us-east-1a" and fields["Region"] == "us-east-1"
        assert fields["LocalIP"] == "10.0.0.10"
        assert re.fullmatch(r"\d{12}", fields["AccountId"])
        assert fields["InstanceLifeCycle"] == "spot"
        assert fields["Monitor"] == "SPOT_ITN_MONITOR"
        assert fields["ProviderID"] == f"aws:///us-east-1a/{INSTANCE}"
        assert fields["InstanceID"] == INSTANCE
        assert fields["ASG"] == "" and fields["PublicIP"] == ""  # no group; imdssim has no public IP
        assert sorted(fields["Pods"]) == sorted(p for p in fields["Pods"] if p.startswith("web-"))
        assert len(fields["Pods"]) == 2
        assert fields["NodeLabels"]["lifecycle"] == "Ec2Spot"
        assert agent.running
        assert not has_log(agent, "not usable")


async def test_an_unsupported_construct_is_named_and_the_default_message_sent(tmp_path: Path) -> None:
    async with WebhookReceiver() as receiver, agent_world(web("web", 1), tmp=tmp_path) as world:
        agent = await world.start_agent(
            WEBHOOK_URL=receiver.url("/webhook"), WEBHOOK_TEMPLATE='{"text":"{{ template "x" . }}"}'
        )
        assert has_log(agent, "template: unsupported construct (line 1): {{template}}")
        itn = spot_itn(world, lead_seconds=15)
        await until(check(lambda: len(receiver.posts()) == 1), within=20)
        text = receiver.posts()[0].json()["text"]
        assert text.startswith(f"[NTH][Instance Interruption] EventID: {spot_event_id(itn)} - Kind: SPOT_ITN")
        assert agent.running

"""EventBridge -> SQS: put ``account`` back into the delivered event.

moto renders the event it hands to a target through a default input template that lists
``version, id, detail-type, source, time, region, resources, detail`` but not ``account``, although
the event it matched against the rule has it. Real EventBridge delivers the full envelope, and
consumers (kubespot's queue source among them) may check the account. The fix is moto's own
template with ``account`` added, in the order AWS uses.
"""

from __future__ import annotations

from moto.events import utils as events_utils

__all__ = ["TEMPLATE", "install"]

TEMPLATE = (
    '{"version": "0", "id": "<id>", "detail-type": "<detail-type>", "source": "<source>", '
    '"account": "<account>", "time": <time>, "region": "<region>", "resources": <resources>, '
    '"detail": <detail>}'
)


def install() -> None:
    """Replace moto's default EventBridge input template (once)."""
    parser = events_utils.EventTemplateParser
    if "account" in parser.DEFAULT_EVENT_INPUT_PATHS_MAP and "<account>" not in (
        parser.DEFAULT_EVENT_INPUT_TEMPLATE
    ):
        parser.DEFAULT_EVENT_INPUT_TEMPLATE = TEMPLATE

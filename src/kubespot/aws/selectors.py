"""EC2 ``Filters`` from an EC2NodeClass's selector terms, as Karpenter's AWS providers build them.

aws/karpenter-provider-aws ``pkg/providers/subnet/subnet.go`` and
``pkg/providers/securitygroup/securitygroup.go`` (``getFilterSets``): each term with tags is one
filter set (a tag whose value is ``*`` becomes ``tag-key``, any other ``tag:<key>`` with the value);
the ids (and, for security groups, the names) of every term are gathered into one more set. The
sets are ORed (one Describe call each); the filters within a set are ANDed by EC2.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubespot.scheduling.api.nodeclass import SelectorTerm

Filter = dict[str, Any]

__all__ = ["Filter", "filter_sets", "tag_filters"]


def tag_filters(tags: Mapping[str, str]) -> list[Filter]:
    """One filter per tag: ``tag-key`` for the wildcard value ``*``, else ``tag:<key>`` = value."""
    return [
        {"Name": "tag-key", "Values": [key]} if value == "*" else {"Name": f"tag:{key}", "Values": [value]}
        for key, value in tags.items()
    ]


def filter_sets(
    terms: Iterable[SelectorTerm], *, id_filter: str, name_filter: str | None = None
) -> list[list[Filter]]:
    """The filter sets of ``terms``: one per tag term, then the ids, then the names (if any)."""
    ids: list[str] = []
    names: list[str] = []
    out: list[list[Filter]] = []
    for term in terms:
        if term.id:
            ids.append(term.id)
        elif name_filter is not None and term.name:
            names.append(term.name)
        else:
            out.append(tag_filters(term.tags or {}))
    if ids:
        out.append([{"Name": id_filter, "Values": ids}])
    if names and name_filter is not None:
        out.append([{"Name": name_filter, "Values": names}])
    return out

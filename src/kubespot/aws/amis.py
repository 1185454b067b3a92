"""An EC2NodeClass's AMIs: ``amiSelectorTerms`` through SSM (aliases, ``ssmParameter``) and DescribeImages.

As aws/karpenter-provider-aws ``pkg/providers/amifamily/ami.go``:

- an ``alias`` term (exclusive) reads its family's parameters (``ami_aliases``); a parameter that
  does not exist is skipped, and none found is an error (``AliasNotFound``);
- otherwise ``id`` and ``ssmParameter`` terms gather into one ``image-id`` filter (a missing
  parameter, or one whose value is no ``ami-`` id, is skipped); a term with ``name`` asks the owners
  ``self`` and ``amazon`` unless it names its ``owner`` (so a public image of a stranger is never
  picked by name alone), tags become filters as for subnets (``*`` = any value);
- every query asks for ``state=available`` images, deprecated ones included; images of an
  architecture Kubernetes does not name (i386) are left out;
- per set of requirements (architecture, plus the alias variant's) one image is kept: not
  deprecated before deprecated, then the newest, then the greatest name (``compareAMI``);
- the list is sorted newest first, ties by id (``AMIs.Sort``); requirements sorted by key length,
  then key, as ``pkg/controllers/nodeclass/ami.go`` writes ``status.amis``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from kubespot.scheduling.api.nodeclass import SelectorTerm
from kubespot.scheduling.labels import ARCH

from .ami_aliases import Requirement, alias_parameters
from .selectors import Filter, tag_filters
from .session import AwsClients, AwsError

__all__ = ["AliasNotFound", "AmiInfo", "ImageQuery", "image_queries", "resolve_amis"]

#: EC2's architecture names → Kubernetes' (aws ``pkg/apis/v1`` ``AWSToKubeArchitectures``).
KUBE_ARCH: Final = {"x86_64": "amd64", "arm64": "arm64"}
_PAGE: Final = 1000
_NOT_FOUND: Final = "ParameterNotFound"


class AliasNotFound(LookupError):
    """No parameter of an alias exists: no image to resolve (Karpenter fails the reconcile)."""


@dataclass(frozen=True, slots=True)
class ImageQuery:
    """One DescribeImages query, and the requirement sets known for image ids (alias variants)."""

    filters: tuple[Filter, ...] = ()
    owners: tuple[str, ...] = ()
    known: Mapping[str, tuple[tuple[Requirement, ...], ...]] = field(default_factory=dict)

    def request(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "Filters": [*self.filters, {"Name": "state", "Values": ["available"]}],
            "IncludeDeprecated": True,
            "MaxResults": _PAGE,
        }
        if self.owners:
            out["Owners"] = list(self.owners)
        return out


@dataclass(frozen=True, slots=True)
class AmiInfo:
    """One image as ``status.amis[]`` reports it."""

    id: str
    name: str
    creation_date: str
    deprecated: bool
    requirements: tuple[Requirement, ...]

    def status(self) -> dict[str, Any]:
        reqs = []
        for key, op, values in sorted(self.requirements, key=lambda r: (len(r[0]), r[0])):
            req: dict[str, Any] = {"key": key, "operator": op}
            if values:
                req["values"] = list(values)
            reqs.append(req)
        out: dict[str, Any] = {"id": self.id, "name": self.name, "requirements": reqs}
        if self.deprecated:
            out["deprecated"] = True
        return out


async def _parameter(clients: AwsClients, name: str) -> str | None:
    try:
        answer = await clients.call("ssm", "GetParameter", Name=name)
    except AwsError as err:
        if err.code == _NOT_FOUND:
            return None
        raise
    return str((answer.get("Parameter") or {}).get("Value") or "") or None


async def image_queries(
    clients: AwsClients, terms: Iterable[SelectorTerm], k8s_version: str
) -> list[ImageQuery]:
    """The DescribeImages queries of ``terms`` (``ami.go`` ``DescribeImageQueries``).

    Raises ``AwsError``, ``AliasNotFound``, ``UnsupportedAlias`` (a ``ValueError``).
    """
    terms = list(terms)
    alias = next((t.alias for t in terms if t.alias), None)
    if alias is not None:
        known: dict[str, tuple[tuple[Requirement, ...], ...]] = {}
        for param in alias_parameters(alias, k8s_version):
            image = await _parameter(clients, param.name)
            if image is not None:
                known[image] = param.requirements
        if not known:
            raise AliasNotFound(f"failed to discover any AMIs for alias {alias}")
        return [ImageQuery(({"Name": "image-id", "Values": sorted(known)},), known=known)]
    ids: list[str] = []
    queries: list[ImageQuery] = []
    for term in terms:
        if term.id:
            ids.append(term.id)
        elif term.ssm_parameter:
            image = await _parameter(clients, term.ssm_parameter)
            if image is not None and image.startswith("ami-"):
                ids.append(image)
        else:
            filters: list[Filter] = []
            owners: tuple[str, ...] = (term.owner,) if term.owner else ()
            if term.name:
                owners = owners or ("self", "amazon")
                filters.append({"Name": "name", "Values": [term.name]})
            filters.extend(tag_filters(term.tags or {}))
            queries.append(ImageQuery(tuple(filters), owners))
    if ids:
        queries.append(ImageQuery(({"Name": "image-id", "Values": ids},)))
    return queries


def _when(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)


def _better(candidate: AmiInfo, existing: AmiInfo) -> bool:
    """``compareAMI``: not deprecated first, then newer, then the greater name."""
    if candidate.deprecated != existing.deprecated:
        return not candidate.deprecated
    a, b = _when(candidate.creation_date), _when(existing.creation_date)
    if a != b:
        return a > b
    return candidate.name > existing.name


async def resolve_amis(
    clients: AwsClients, terms: Iterable[SelectorTerm], k8s_version: str, *, now: datetime
) -> list[AmiInfo]:
    """The images the terms select, one per requirement set, newest first. Raises as ``image_queries``."""
    kept: dict[frozenset[Requirement], AmiInfo] = {}
    for query in await image_queries(clients, terms, k8s_version):
        request = query.request()
        while True:
            page = await clients.call("ec2", "DescribeImages", **request)
            for raw in page.get("Images") or []:
                arch = KUBE_ARCH.get(str(raw.get("Architecture") or ""))
                if arch is None:
                    continue
                image_id = str(raw["ImageId"])
                deprecation = raw.get("DeprecationTime")
                deprecated = bool(deprecation) and _when(str(deprecation)) <= now
                for reqs in query.known.get(image_id, ((),)):
                    full = (*reqs, (ARCH, "In", (arch,)))
                    ami = AmiInfo(
                        image_id,
                        str(raw.get("Name") or ""),
                        str(raw.get("CreationDate") or ""),
                        deprecated,
                        full,
                    )
                    key = frozenset(full)
                    if key not in kept or _better(ami, kept[key]):
                        kept[key] = ami
            token = page.get("NextToken")
            if not token:
                break
            request["NextToken"] = token
    return sorted(kept.values(), key=lambda a: (-_when(a.creation_date).timestamp(), a.id))

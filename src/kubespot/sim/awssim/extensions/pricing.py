"""The AWS Price List Service's ``GetProducts`` for EC2, which moto does not have.

Served in front of moto (``PricingMiddleware``, installed by ``MotoServer``): a request whose
``X-Amz-Target`` is ``AWSPriceListService.<Operation>`` (the JSON 1.1 protocol boto3's ``pricing``
client speaks) is answered here, anything else goes on to moto. So ``boto3.client("pricing")``
pointed at the server works unchanged.

What is served (shapes per the Price List Service API reference, ``GetProducts``, and the price
list file format of the AWS Billing user guide): one product per instance type of the on-demand
table (``kubespot.sim.awssim.price_data``, generated from ``shared/data/aws-ondemand-prices.json``,
or what ``configure()`` was given) and region, in each of the three capacity states AWS lists
(``capacitystatus`` ``Used`` at the table's price, ``UnusedCapacityReservation`` at the same price,
``AllocatedCapacityReservation`` at 0), Linux, no pre-installed software. ``*.metal`` types are
``productFamily`` ``Compute Instance (bare metal)`` with ``tenancy`` ``Dedicated`` (the query
Karpenter's pricing provider makes for them), the others ``Compute Instance`` and ``Shared``.
Attributes include ``instanceType``, ``location``, ``regionCode``, ``operatingSystem``,
``tenancy``, ``preInstalledSw``, ``capacitystatus``, ``marketoption``, ``licenseModel``,
``usagetype``, ``operation``, ``servicecode`` and, for types moto knows, ``vcpu`` and ``memory``.
Each ``PriceList`` entry is a JSON *string* with ``product``, ``serviceCode``, ``terms.OnDemand``
(offer term ``JRTCKXETXF``, one price dimension, ``pricePerUnit.USD`` with ten decimals),
``version`` and ``publicationDate``.

Request handling: ``ServiceCode`` ``AmazonEC2`` (another code answers an empty list);
``Filters`` of type ``TERM_MATCH`` / ``EQUALS`` (exact value), ``CONTAINS`` (substring),
``ANY_OF`` / ``NONE_OF`` (comma-separated values), the field named case-insensitively
(``ServiceCode``, ``productFamily`` or any attribute); every filter must match. ``MaxResults``
1-100 (default 100) and an opaque ``NextToken`` bound to the query (``InvalidNextTokenException``
otherwise); ``FormatVersion`` ``aws_v1`` only (``InvalidParameterException`` otherwise).
``inject_fault(code, times)`` fails the next calls with ``ThrottlingException``,
``AccessDeniedException`` or ``InternalErrorException``, for tests of a caller's fallback.
Other operations (``DescribeServices``, ``GetAttributeValues`` …) answer
``UnknownOperationException``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from moto.ec2.models.instance_types import INSTANCE_TYPES

from kubespot.sim.awssim.price_data import ONDEMAND_PRICES

__all__ = [
    "PricingMiddleware",
    "configure",
    "inject_fault",
    "install",
    "products",
]

_TARGET_PREFIX = "AWSPriceListService."
_OFFER_TERM = "JRTCKXETXF"  # AWS's code for the on-demand offer term
_RATE_CODE = "6YS6EN2CT7"  # AWS's code for the hourly price dimension of that term
_MAX_RESULTS = 100
_PUBLICATION = "2026-07-20T00:00:00Z"
_VERSION = "20260720000000"
#: The Price List's ``location`` for each region (the names AWS uses in the price list).
LOCATIONS: Mapping[str, str] = {
    "us-east-1": "US East (N. Virginia)",
    "us-east-2": "US East (Ohio)",
    "us-west-1": "US West (N. California)",
    "us-west-2": "US West (Oregon)",
    "eu-west-1": "EU (Ireland)",
    "eu-central-1": "EU (Frankfurt)",
    "ap-south-1": "Asia Pacific (Mumbai)",
    "ap-northeast-1": "Asia Pacific (Tokyo)",
    "ap-southeast-1": "Asia Pacific (Singapore)",
    "ap-southeast-2": "Asia Pacific (Sydney)",
}
_FAULTS = {
    "ThrottlingException": (400, "Rate exceeded"),
    "AccessDeniedException": (400, "User is not authorized to perform: pricing:GetProducts"),
    "InternalErrorException": (500, "An internal error occurred"),
}

_lock = threading.Lock()
_tables: dict[str, dict[str, float]] = {r: dict(t) for r, t in ONDEMAND_PRICES.items()}
_products: list[tuple[dict[str, str], str]] | None = None  # (searchable fields, PriceList JSON)
_faults: list[str] = []


class PricingError(Exception):
    """An error answer: AWS's error type, message and HTTP status."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


def configure(tables: Mapping[str, Mapping[str, float]] | None) -> None:
    """Serve ``{region: {instance type: USD per hour}}`` (None: the packaged table)."""
    global _products
    source = ONDEMAND_PRICES if tables is None else tables
    with _lock:
        _tables.clear()
        _tables.update({r: {str(k): float(v) for k, v in t.items()} for r, t in source.items()})
        _products = None


def inject_fault(code: str, *, times: int = 1) -> None:
    """Fail the next ``times`` Pricing calls with ``code`` (see ``_FAULTS``)."""
    if code not in _FAULTS:
        raise ValueError(f"unknown fault {code!r}; one of {sorted(_FAULTS)}")
    with _lock:
        _faults.extend([code] * times)


def clear_faults() -> None:
    with _lock:
        _faults.clear()


def _sku(*parts: str) -> str:
    digest = hashlib.sha256("/".join(parts).encode()).digest()
    return base64.b32encode(digest).decode()[:16]


def _memory(info: Mapping[str, Any] | None) -> str | None:
    if not info:
        return None
    gib = info["MemoryInfo"]["SizeInMiB"] / 1024
    return f"{gib:g} GiB"


@dataclass(frozen=True, slots=True)
class _Status:
    name: str
    usage: str
    free: bool


_STATUSES = (
    _Status("Used", "BoxUsage", False),
    _Status("UnusedCapacityReservation", "UnusedBox", False),
    _Status("AllocatedCapacityReservation", "Reservation", True),
)


def _product(region: str, name: str, price: float, status: _Status) -> dict[str, Any]:
    metal = name.endswith(".metal") or ".metal-" in name
    family = "Compute Instance (bare metal)" if metal else "Compute Instance"
    tenancy = "Dedicated" if metal else "Shared"
    sku = _sku(region, name, status.name, tenancy)
    info = INSTANCE_TYPES.get(name)
    attributes = {
        "servicecode": "AmazonEC2",
        "servicename": "Amazon Elastic Compute Cloud",
        "location": LOCATIONS.get(region, region),
        "locationType": "AWS Region",
        "regionCode": region,
        "instanceType": name,
        "operatingSystem": "Linux",
        "licenseModel": "No License required",
        "preInstalledSw": "NA",
        "tenancy": tenancy,
        "capacitystatus": status.name,
        "marketoption": "OnDemand",
        "operation": "RunInstances",
        "usagetype": f"{status.usage}:{name}",
    }
    if info:
        attributes["vcpu"] = str(info["VCpuInfo"]["DefaultVCpus"])
        attributes["memory"] = _memory(info) or ""
        attributes["currentGeneration"] = "Yes" if info.get("CurrentGeneration") else "No"
    usd = 0.0 if status.free else price
    dimension = f"{sku}.{_OFFER_TERM}.{_RATE_CODE}"
    return {
        "product": {"productFamily": family, "attributes": attributes, "sku": sku},
        "serviceCode": "AmazonEC2",
        "terms": {
            "OnDemand": {
                f"{sku}.{_OFFER_TERM}": {
                    "priceDimensions": {
                        dimension: {
                            "unit": "Hrs",
                            "endRange": "Inf",
                            "description": f"${usd:g} per On Demand Linux {name} Instance Hour",
                            "appliesTo": [],
                            "rateCode": dimension,
                            "beginRange": "0",
                            "pricePerUnit": {"USD": f"{usd:.10f}"},
                        }
                    },
                    "sku": sku,
                    "effectiveDate": _PUBLICATION,
                    "offerTermCode": _OFFER_TERM,
                    "termAttributes": {},
                }
            }
        },
        "version": _VERSION,
        "publicationDate": _PUBLICATION,
    }


def products() -> list[tuple[dict[str, str], str]]:
    """Every served product: (lower-cased field → value, the PriceList JSON string), built once."""
    global _products
    with _lock:
        if _products is None:
            built = []
            for region in sorted(_tables):
                for name in sorted(_tables[region]):
                    for status in _STATUSES:
                        item = _product(region, name, _tables[region][name], status)
                        fields = {k.lower(): v for k, v in item["product"]["attributes"].items()}
                        fields["productfamily"] = item["product"]["productFamily"]
                        built.append((fields, json.dumps(item, separators=(",", ":"))))
            _products = built
        return _products


def _matcher(kind: str, value: str) -> Callable[[str | None], bool]:
    if kind in ("TERM_MATCH", "EQUALS"):
        return lambda have: have == value
    if kind == "CONTAINS":
        return lambda have: have is not None and value in have
    choices = {v.strip() for v in value.split(",")}
    if kind == "ANY_OF":
        return lambda have: have in choices
    if kind == "NONE_OF":
        return lambda have: have not in choices
    raise PricingError("InvalidParameterException", f"Invalid filter type {kind!r}")


def _query_key(request: Mapping[str, Any]) -> str:
    shape = {k: request.get(k) for k in ("ServiceCode", "Filters", "FormatVersion")}
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:16]


def get_products(request: Mapping[str, Any]) -> dict[str, Any]:
    """Answer one ``GetProducts`` request body (see the module docstring)."""
    service = request.get("ServiceCode")
    if not service:
        raise PricingError("InvalidParameterException", "ServiceCode is required")
    fmt = request.get("FormatVersion") or "aws_v1"
    if fmt != "aws_v1":
        raise PricingError("InvalidParameterException", f"Invalid FormatVersion {fmt!r}")
    size = int(request.get("MaxResults") or _MAX_RESULTS)
    if not 1 <= size <= _MAX_RESULTS:
        raise PricingError("InvalidParameterException", "MaxResults must be between 1 and 100")
    key = _query_key(request)
    offset = 0
    if request.get("NextToken"):
        try:
            token = json.loads(base64.urlsafe_b64decode(str(request["NextToken"]).encode()))
            offset = int(token["o"])
            if token["q"] != key:
                raise ValueError("token of another query")
        except (ValueError, KeyError, TypeError):
            raise PricingError("InvalidNextTokenException", "The NextToken is invalid") from None
    if service != "AmazonEC2":
        return {"FormatVersion": fmt, "PriceList": []}
    checks = []
    for item in request.get("Filters") or []:
        field = str(item["Field"]).lower()
        checks.append((field, _matcher(str(item["Type"]), str(item["Value"]))))
    matches = [text for fields, text in products() if all(ok(fields.get(f)) for f, ok in checks)]
    page = matches[offset : offset + size]
    answer: dict[str, Any] = {"FormatVersion": fmt, "PriceList": page}
    if offset + size < len(matches):
        raw = json.dumps({"o": offset + size, "q": key}).encode()
        answer["NextToken"] = base64.urlsafe_b64encode(raw).decode()
    return answer


def _answer(operation: str, body: bytes) -> tuple[int, dict[str, Any]]:
    with _lock:
        fault = _faults.pop(0) if _faults else None
    try:
        if fault is not None:
            status, message = _FAULTS[fault]
            raise PricingError(fault, message, status)
        if operation != "GetProducts":
            raise PricingError("UnknownOperationException", f"awssim serves no {operation}")
        request = json.loads(body or b"{}")
        return 200, get_products(request)
    except PricingError as exc:
        return exc.status, {"__type": exc.code, "Message": exc.message}


_StartResponse = Callable[..., Any]
_WSGIApp = Callable[[dict[str, Any], _StartResponse], Iterable[bytes]]


class PricingMiddleware:
    """WSGI middleware answering the Price List Service's JSON calls and passing the rest to moto."""

    def __init__(self, app: _WSGIApp) -> None:
        self._app = app

    def __call__(self, environ: dict[str, Any], start_response: _StartResponse) -> Iterable[bytes]:
        target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
        if not target.startswith(_TARGET_PREFIX):
            return self._app(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        status, answer = _answer(target[len(_TARGET_PREFIX) :], body)
        payload = json.dumps(answer).encode()
        reason = {200: "OK", 400: "Bad Request", 500: "Internal Server Error"}[status]
        headers = [
            ("Content-Type", "application/x-amz-json-1.1"),
            ("Content-Length", str(len(payload))),
            ("x-amzn-RequestId", hashlib.sha256(payload).hexdigest()[:32]),
        ]
        start_response(f"{status} {reason}", headers)
        return [payload]


def install() -> None:
    """Nothing to patch in moto: the server puts ``PricingMiddleware`` in front of it."""

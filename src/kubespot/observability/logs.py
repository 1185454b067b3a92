"""The agent's log output: one handler on the root logger, JSON or console lines, context fields.

``configure()`` installs (or replaces) kubespot's handler. ``log_context()`` / ``bind()`` put fields
such as ``event_id`` and ``node`` in a context variable; every record logged while they are bound
carries them, including records from asyncio tasks created inside the context, because a task
copies the context it was created in. Fields passed as ``extra={...}`` are added too.

JSON lines: ``{"time": "2026-11-22T02:33:00.123Z", "level": "info", "logger": ..., "message": ...,
<context fields>, <extra fields>, "exception": <traceback>}``. Console lines:
``2026-11-22T02:33:00.123Z INFO kubespot.agent: message event_id=... node=...``.

Logging must never fail, whatever a caller passes: values JSON cannot encode are ``str()``'d, and a
record that still cannot be formatted is written as a fallback line saying so.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from types import MappingProxyType
from typing import TextIO

import orjson

__all__ = [
    "ConsoleFormatter",
    "JsonFormatter",
    "bind",
    "configure",
    "current_context",
    "log_context",
    "parse_level",
    "unbind",
]

Fields = Mapping[str, object]

_EMPTY: Fields = MappingProxyType({})
_CONTEXT: ContextVar[Fields] = ContextVar("kubespot_log_context", default=_EMPTY)

#: Where the handler stamps the context on a record (the record may be formatted later).
_CONTEXT_ATTR = "kubespot_context"

#: Attributes every LogRecord has; anything else on a record came from ``extra={...}``.
_STANDARD_ATTRS = frozenset(
    (*logging.LogRecord("", 0, "", 0, "", (), None).__dict__, "message", "asctime", "taskName", _CONTEXT_ATTR)
)

#: JSON keys of our own; a context or extra field with one of these names gets a trailing "_".
_CORE_KEYS = frozenset(("time", "level", "logger", "message", "exception", "stack"))

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}

#: Libraries that log every request at INFO (httpx2: one line per IMDS poll); quieted to WARNING
#: unless the agent runs at debug level.
_CHATTY_LOGGERS = ("httpx2", "httpx")

_JSON_OPTIONS = orjson.OPT_NON_STR_KEYS


# -- context ---------------------------------------------------------------------------------------


def current_context() -> Fields:
    """The fields bound in the current context (read-only)."""
    return _CONTEXT.get()


def bind(**fields: object) -> Token[Fields]:
    """Add ``fields`` to the log context until ``unbind(token)``. A None value removes a field."""
    merged = dict(_CONTEXT.get())
    for key, value in fields.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return _CONTEXT.set(MappingProxyType(merged))


def unbind(token: Token[Fields]) -> None:
    """Restore the context as it was before the ``bind()`` that returned ``token``."""
    _CONTEXT.reset(token)


@contextmanager
def log_context(**fields: object) -> Iterator[Fields]:
    """Every record logged inside (and in tasks created inside) carries ``fields``."""
    token = bind(**fields)
    try:
        yield _CONTEXT.get()
    finally:
        unbind(token)


# -- formatting helpers ----------------------------------------------------------------------------


def _safe_str(value: object) -> str:
    """str(value), whatever value is; lone surrogates escaped so the text is valid UTF-8."""
    try:
        text = value if isinstance(value, str) else str(value)
    except Exception:
        try:
            text = object.__repr__(value)
        except Exception:
            text = "<unprintable>"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _encodable(value: object) -> object:
    """``value`` itself if it serializes (as orjson does with ``default=_safe_str``), else its
    text. Returned as a pre-encoded Fragment so the final dump cannot fail on it."""
    try:
        return orjson.Fragment(orjson.dumps(value, default=_safe_str, option=_JSON_OPTIONS))
    except Exception:  # ints beyond 64 bits, lone surrogates, cycles, ...
        return _safe_str(value)


def _timestamp(created: float) -> str:
    """RFC 3339 UTC with milliseconds: 2026-11-22T02:33:00.123Z."""
    seconds = int(created)
    millis = min(int((created - seconds) * 1000), 999)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


def _message(record: logging.LogRecord) -> str:
    try:
        return _safe_str(record.getMessage())
    except Exception as exc:  # "%d" with a str, wrong argument count: keep the line, say why
        return (
            f"{_safe_str(record.msg)} [log arguments {_safe_str(_safe_repr(record.args))} did not "
            f"format: {_safe_str(exc)}]"
        )


def _safe_repr(value: object) -> str:
    try:
        return repr(value)
    except Exception:
        return f"<unprintable {type(value).__name__}>"


def _fields(record: logging.LogRecord) -> dict[str, object]:
    """Context fields, then extra fields (the more specific, so they win on a clash)."""
    context = getattr(record, _CONTEXT_ATTR, None)
    if not isinstance(context, Mapping):
        context = _CONTEXT.get()
    out: dict[str, object] = {}
    for key, value in context.items():
        out[_safe_str(key)] = value
    for key, value in record.__dict__.items():
        if key not in _STANDARD_ATTRS:
            out[_safe_str(key)] = value
    return out


class _SafeFormatter(logging.Formatter):
    """Shared parts: the traceback text, and never raising."""

    def format(self, record: logging.LogRecord) -> str:
        try:
            return self._format(record)
        except Exception as exc:
            return self._fallback(record, exc)

    def _format(self, record: logging.LogRecord) -> str:
        raise NotImplementedError

    def _fallback(self, record: logging.LogRecord, exc: Exception) -> str:
        try:
            return (
                f"{_timestamp(record.created)} {_safe_str(record.levelname)} {_safe_str(record.name)}: "
                f"{_safe_str(_safe_repr(record.msg))} [log record did not format: "
                f"{type(exc).__name__}: {_safe_str(exc)}]"
            )
        except Exception:
            return "kubespot: a log record could not be formatted"

    def _traceback(self, record: logging.LogRecord) -> str | None:
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        return _safe_str(record.exc_text) if record.exc_text else None


class JsonFormatter(_SafeFormatter):
    """One JSON object per record (no newline; the handler adds it)."""

    def _format(self, record: logging.LogRecord) -> str:
        doc: dict[str, object] = {
            "time": _timestamp(record.created),
            "level": _safe_str(record.levelname).lower(),
            "logger": _safe_str(record.name),
            "message": _message(record),
        }
        for key, value in _fields(record).items():
            doc[key + "_" if key in _CORE_KEYS else key] = value
        traceback = self._traceback(record)
        if traceback:
            doc["exception"] = traceback
        if record.stack_info:
            doc["stack"] = _safe_str(self.formatStack(record.stack_info))
        try:
            return orjson.dumps(doc, default=_safe_str, option=_JSON_OPTIONS).decode()
        except Exception:
            # Only now pay for value-by-value encoding, to find and stringify the culprit.
            safe = {key: _encodable(value) for key, value in doc.items()}
            return orjson.dumps(safe, option=_JSON_OPTIONS).decode()

    def _fallback(self, record: logging.LogRecord, exc: Exception) -> str:
        try:
            doc = {
                "time": _timestamp(record.created),
                "level": _safe_str(record.levelname).lower(),
                "logger": _safe_str(record.name),
                "message": _safe_str(_safe_repr(record.msg)),
                "log_error": f"log record did not format: {type(exc).__name__}: {_safe_str(exc)}",
            }
            return orjson.dumps(doc).decode()
        except Exception:
            return '{"level":"error","message":"kubespot: a log record could not be formatted"}'


def _console_value(value: object) -> str:
    text = _safe_str(value)
    # Quote what would not read back as one key=value token.
    if not text or any(c.isspace() or c in '="' for c in text):
        return orjson.dumps(text).decode()
    return text


class ConsoleFormatter(_SafeFormatter):
    """``<time> <LEVEL> <logger>: <message> key=value ...`` and the traceback on following lines."""

    def _format(self, record: logging.LogRecord) -> str:
        parts = [
            _timestamp(record.created),
            " ",
            _safe_str(record.levelname),
            " ",
            _safe_str(record.name),
            ": ",
            _message(record),
        ]
        for key, value in _fields(record).items():
            parts += (" ", key, "=", _console_value(value))
        traceback = self._traceback(record)
        if traceback:
            parts += ("\n", traceback)
        if record.stack_info:
            parts += ("\n", _safe_str(self.formatStack(record.stack_info)))
        return "".join(parts)


# -- configuration ---------------------------------------------------------------------------------


class _Handler(logging.StreamHandler[TextIO]):
    """kubespot's handler; its class marks it, so ``configure()`` can find and replace it."""

    def __init__(self, stream: TextIO, formatter: logging.Formatter) -> None:
        super().__init__(stream)
        self.setFormatter(formatter)
        self.addFilter(_stamp_context)


def _stamp_context(record: logging.LogRecord) -> bool:
    # Filters run synchronously in the logging call, so this is the caller's context.
    if not hasattr(record, _CONTEXT_ATTR):
        setattr(record, _CONTEXT_ATTR, _CONTEXT.get())
    return True


def parse_level(level: str) -> int:
    """debug, info, warn, warning, error or critical (any case) as a logging level number."""
    try:
        return _LEVELS[level.strip().lower()]
    except (KeyError, AttributeError):
        raise ValueError(f"unknown log level {level!r}; expected one of {', '.join(_LEVELS)}") from None


def configure(
    *,
    json: bool,
    level: str,
    stream: TextIO | None = None,
    logger_levels: Iterable[tuple[str, str]] = (),
) -> None:
    """Log to ``stream`` (default: the current ``sys.stderr``) at ``level``, as JSON or console
    lines; ``logger_levels`` (name, level) set single loggers (and so their children) over it.
    Idempotent: a previous kubespot handler on the root logger is replaced, others are left
    alone."""
    number = parse_level(level)
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, _Handler):
            root.removeHandler(handler)
            handler.close()
    formatter: logging.Formatter = JsonFormatter() if json else ConsoleFormatter()
    root.addHandler(_Handler(sys.stderr if stream is None else stream, formatter))
    root.setLevel(number)
    for name in _CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET if number <= logging.DEBUG else logging.WARNING)
    # After the chatty libraries' defaults: a level named for one of them wins.
    for name, named in logger_levels:
        logging.getLogger(name.strip()).setLevel(parse_level(named))

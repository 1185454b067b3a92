"""Log lines as a shipper or a person reads them: JSON objects or console text, with context fields."""

from __future__ import annotations

import asyncio
import io
import logging
import re
from collections.abc import Iterator

import orjson
import pytest

from kubespot.observability import bind, configure, current_context, log_context, unbind
from kubespot.observability import logs as logs_module

TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
log = logging.getLogger("kubespot.agent")


@pytest.fixture(autouse=True)
def restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.getLogger("httpx2").setLevel(logging.NOTSET)


def json_lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in stream.getvalue().splitlines()]


def test_json_line_has_core_fields_context_and_extra() -> None:
    out = io.StringIO()
    configure(json=True, level="info", stream=out)
    with log_context(event_id="ev-1", node="ip-10-0-0-1", instance_id="i-0abc"):
        log.info("cordoned %s", "ip-10-0-0-1", extra={"pods": 4, "dry_run": False})
    (line,) = json_lines(out)
    assert re.fullmatch(TIME, str(line["time"]))
    assert line == {
        "time": line["time"],
        "level": "info",
        "logger": "kubespot.agent",
        "message": "cordoned ip-10-0-0-1",
        "event_id": "ev-1",
        "node": "ip-10-0-0-1",
        "instance_id": "i-0abc",
        "pods": 4,
        "dry_run": False,
    }
    assert list(line)[:4] == ["time", "level", "logger", "message"]


def test_context_ends_with_the_block_and_nests() -> None:
    out = io.StringIO()
    configure(json=True, level="info", stream=out)
    with log_context(node="n1"):
        with log_context(event_id="ev-1", kind="spot-itn"):
            log.info("inner")
            with log_context(kind=None):  # None removes a field
                log.info("no kind")
        log.info("outer")
    log.info("none")
    inner, no_kind, outer, none = json_lines(out)
    assert (inner["node"], inner["event_id"], inner["kind"]) == ("n1", "ev-1", "spot-itn")
    assert "kind" not in no_kind and no_kind["event_id"] == "ev-1"
    assert outer["node"] == "n1" and "event_id" not in outer
    assert "node" not in none
    assert dict(current_context()) == {}


def test_bind_and_unbind() -> None:
    token = bind(event_id="ev-9")
    try:
        assert current_context()["event_id"] == "ev-9"
    finally:
        unbind(token)
    assert "event_id" not in current_context()


async def test_tasks_created_inside_the_context_carry_its_fields() -> None:
    out = io.StringIO()
    configure(json=True, level="info", stream=out)

    async def work(tag: str) -> None:
        await asyncio.sleep(0)  # interleave with the other task
        log.info("working", extra={"tag": tag})

    outside = asyncio.get_running_loop().create_future()

    async def late() -> None:
        await outside
        log.info("late", extra={"tag": "late"})

    late_task = asyncio.create_task(late())  # created before any context: must not see one
    with log_context(event_id="ev-a"):
        task_a = asyncio.create_task(work("a"))
    with log_context(event_id="ev-b"):
        task_b = asyncio.create_task(work("b"))
    outside.set_result(None)
    await asyncio.gather(task_a, task_b, late_task)

    by_tag = {line["tag"]: line for line in json_lines(out)}
    assert by_tag["a"]["event_id"] == "ev-a"
    assert by_tag["b"]["event_id"] == "ev-b"
    assert "event_id" not in by_tag["late"]


def test_console_format() -> None:
    out = io.StringIO()
    configure(json=False, level="info", stream=out)
    with log_context(event_id="ev-1", node="n1"):
        log.warning("drain slow", extra={"reason": "pdb blocks", "left": 3, "empty": ""})
    line = out.getvalue().rstrip("\n")
    assert re.fullmatch(
        TIME
        + r' WARNING kubespot\.agent: drain slow event_id=ev-1 node=n1 reason="pdb blocks" left=3 empty=""',
        line,
    ), line


def test_exception_is_included_in_both_formats() -> None:
    for json in (True, False):
        out = io.StringIO()
        configure(json=json, level="info", stream=out)
        try:
            raise RuntimeError("api down")
        except RuntimeError:
            log.exception("patch failed")
        text = out.getvalue()
        if json:
            (line,) = json_lines(out)
            assert line["level"] == "error"
            assert "Traceback" in str(line["exception"]) and "RuntimeError: api down" in str(
                line["exception"]
            )
        else:
            assert "ERROR kubespot.agent: patch failed\nTraceback" in text
            assert text.rstrip().endswith("RuntimeError: api down")


class Unprintable:
    def __str__(self) -> str:
        raise ValueError("no")

    def __repr__(self) -> str:
        raise ValueError("no")


def test_values_json_cannot_encode_are_stringified_never_crash() -> None:
    out = io.StringIO()
    configure(json=True, level="info", stream=out)
    with log_context(event_id="ev-1", when=object()):
        log.info(
            "odd values",
            extra={
                "big": 2**70,
                "bad": Unprintable(),
                "surrogate": "\udcff",
                "raw": b"\x00\xff",
                "mapping": {1: "one"},
                "time": "not ours",  # clashes with a core key: kept under another name
            },
        )
    (line,) = json_lines(out)
    assert line["message"] == "odd values"
    assert line["big"] == str(2**70)
    assert "Unprintable" in str(line["bad"])
    assert line["surrogate"] == "\\udcff"
    assert isinstance(line["raw"], str)
    assert line["mapping"] == {"1": "one"}
    assert str(line["when"]).startswith("<object object")
    assert line["time_"] == "not ours" and re.fullmatch(TIME, str(line["time"]))


def test_console_survives_bad_values_too() -> None:
    out = io.StringIO()
    configure(json=False, level="info", stream=out)
    log.info("odd", extra={"bad": Unprintable(), "surrogate": "a\udcffb"})
    line = out.getvalue().strip()
    assert re.fullmatch(
        TIME + r' INFO kubespot\.agent: odd bad="<.*Unprintable.*>" surrogate=a\\udcffb', line
    ), line


def test_bad_format_arguments_still_log_a_line() -> None:
    out = io.StringIO()
    configure(json=True, level="info", stream=out)
    # pytest's capture handler would raise on this record; only ours is under test here.
    root = logging.getLogger()
    root.handlers[:] = [h for h in root.handlers if isinstance(h, logs_module._Handler)]
    log.info("%d pods evicted", "three")
    (line,) = json_lines(out)
    assert str(line["message"]).startswith("%d pods evicted [log arguments ('three',) did not format")


def test_a_formatter_failure_prints_a_fallback_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(record: logging.LogRecord) -> dict[str, object]:
        raise RuntimeError("formatter bug")

    monkeypatch.setattr(logs_module, "_fields", broken)
    for json in (True, False):
        out = io.StringIO()
        configure(json=json, level="info", stream=out)
        log.info("still here")
        text = out.getvalue()
        assert "still here" in text and "formatter bug" in text
        if json:
            (line,) = json_lines(out)
            assert line["level"] == "info" and "RuntimeError" in str(line["log_error"])


def test_configure_is_idempotent_and_parses_levels() -> None:
    first, second = io.StringIO(), io.StringIO()
    configure(json=True, level="DEBUG", stream=first)
    configure(json=False, level="Warn", stream=second)
    ours = [h for h in logging.getLogger().handlers if isinstance(h, logs_module._Handler)]
    assert len(ours) == 1
    log.info("filtered out")
    log.warning("kept")
    assert first.getvalue() == ""
    assert "WARNING kubespot.agent: kept" in second.getvalue()
    assert "filtered out" not in second.getvalue()
    for name, number in [("debug", 10), ("INFO", 20), ("warning", 30), ("warn", 30), ("error", 40)]:
        configure(json=True, level=name, stream=io.StringIO())
        assert logging.getLogger().level == number
    with pytest.raises(ValueError, match="unknown log level"):
        configure(json=True, level="verbose", stream=io.StringIO())


def test_httpx2_request_lines_are_quiet_unless_debugging() -> None:
    configure(json=True, level="info", stream=io.StringIO())
    assert not logging.getLogger("httpx2").isEnabledFor(logging.INFO)
    configure(json=True, level="debug", stream=io.StringIO())
    assert logging.getLogger("httpx2").isEnabledFor(logging.INFO)


def test_logger_levels_set_single_loggers_over_the_root_level() -> None:
    """``observability.logger_levels``: kubespot's own debug lines at an info root, the AWS SDK's
    and aiohttp's access lines kept out (Python ``logging``: a logger's effective level is its own,
    else its nearest ancestor's, and its children follow it)."""
    out = io.StringIO()
    names = ("kubespot", "botocore", "aiohttp.access")
    try:
        configure(
            json=True,
            level="info",
            stream=out,
            logger_levels=(("kubespot", "debug"), ("botocore", "warning"), ("aiohttp.access", "WARN")),
        )
        logging.getLogger("kubespot.controller.queue").debug("received %d", 3)
        logging.getLogger("botocore.endpoint").info("sending a request")
        logging.getLogger("aiohttp.access").info("GET /metrics 200")
        logging.getLogger("other.library").debug("hidden at the root's info")
        logging.getLogger("other.library").info("shown")
        assert [line["message"] for line in json_lines(out)] == ["received 3", "shown"]
    finally:
        for name in names:
            logging.getLogger(name).setLevel(logging.NOTSET)


def test_logger_levels_must_name_a_logger_and_a_known_level() -> None:
    from kubespot.config.loader import InvalidSetting
    from kubespot.config.observability import ObservabilitySettings

    given = (("kubespot", "Debug"),)
    assert ObservabilitySettings(logger_levels=given).logger_levels == given
    for bad in ((("", "debug"),), (("botocore", "verbose"),)):
        with pytest.raises(InvalidSetting, match="logger_levels"):
            ObservabilitySettings(logger_levels=bad)

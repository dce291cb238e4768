"""Logging set-up: one line per event, `key=value` fields (logfmt) or JSON.

Call sites pass fields with `extra=kv(container=..., reason=...)`; the formatter renders them.
Libraries' records and uncaught exceptions go through the same formatter: no raw traceback.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import traceback
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from guardian.core.redaction import Redactor

FIELDS = "guardian_fields"


def kv(**fields: Any) -> dict[str, Any]:
    """The `extra=` argument carrying structured fields for one log line."""
    return {FIELDS: fields}


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    """The record's structured fields; a library's record also names its logger."""
    fields: dict[str, Any] = getattr(record, FIELDS, {})
    if record.name == "guardian" or record.name.startswith("guardian."):
        return fields
    return {"logger": record.name, **fields}


def _value(v: Any) -> str:
    text = str(v)
    if text == "" or any(c in text for c in ' ="\n\t'):
        return json.dumps(text, ensure_ascii=False)
    return text


class LogfmtFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        parts = [
            f"ts={ts}",
            f"level={record.levelname.lower()}",
            f"msg={_value(record.getMessage())}",
        ]
        for k, v in _fields(record).items():
            if v is not None:
                parts.append(f"{k}={_value(v)}")
        if record.exc_info and record.levelno >= logging.ERROR:
            parts.append(f"error={_value(self.formatException(record.exc_info).splitlines()[-1])}")
        return " ".join(parts)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        doc: dict[str, Any] = {
            "ts": ts,
            "level": record.levelname.lower(),
            "msg": record.getMessage(),
        }
        for k, v in _fields(record).items():
            if v is not None:
                doc[k] = v if isinstance(v, int | float | bool) else str(v)
        if record.exc_info and record.levelno >= logging.ERROR:
            doc["error"] = self.formatException(record.exc_info).splitlines()[-1]
        return json.dumps(doc, ensure_ascii=False)


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever sys.stderr is at the time of each record, not at set-up time."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def _formatter(fmt: str) -> logging.Formatter:
    return JsonFormatter() if fmt == "json" else LogfmtFormatter()


def setup_logging(level: str = "info", fmt: str = "text") -> None:
    handler = _StderrHandler()
    handler.setFormatter(_formatter(fmt))
    root = logging.getLogger("guardian")
    # Patterns (URL credentials, KEY=secret pairs) are redacted from the first line on; the
    # daemon adds the secrets it reads (install_redaction).
    handler.addFilter(RedactingFilter(Redactor()))
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
    # Libraries (APScheduler, waitress, urllib3) log through the same handler, warnings and
    # worse: without one on the root logger, Python prints their records raw to stderr.
    top = logging.getLogger()
    top.handlers[:] = [h for h in top.handlers if not isinstance(h, _StderrHandler)] + [handler]
    top.setLevel(logging.WARNING)
    # The scheduler's own chatter ("Running job ...") is noise at info level.
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    # "Task queue depth is N" at every busy moment: a flood of requests would flood the log.
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
    sys.excepthook = _uncaught
    threading.excepthook = _uncaught_in_thread
    sys.unraisablehook = _unraisable


def _uncaught(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    logging.getLogger("guardian").critical("uncaught exception", exc_info=(kind, exc, tb))


def _uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return
    thread = args.thread.name if args.thread is not None else None
    logging.getLogger("guardian").error(
        "thread ended by an uncaught exception",
        extra=kv(thread=thread),
        exc_info=(args.exc_type, args.exc_value, args.exc_traceback),  # type: ignore[arg-type]
    )


def _unraisable(args: Any) -> None:
    exc = args.exc_value
    logging.getLogger("guardian").warning(
        "exception ignored",
        extra=kv(where=repr(args.object)[:200], error=f"{type(exc).__name__}: {exc}"[:500]),
    )


def reconfigure_logging(level: str, fmt: str) -> None:
    """A reload's log level and format, set on the handlers in place: their redaction stays."""
    root = logging.getLogger("guardian")
    root.setLevel(level.upper())
    for handler in root.handlers:
        handler.setFormatter(_formatter(fmt))


class RedactingFilter(logging.Filter):
    """Applied to Guardian's log handlers: no secret reaches a log line, whoever logs it."""

    def __init__(self, redact: Redactor) -> None:
        super().__init__()
        self.redact = redact

    def filter(self, record: logging.LogRecord) -> bool:
        if record.args:
            record.msg, record.args = record.getMessage(), None
        record.msg = self.redact(str(record.msg))
        fields: dict[str, Any] | None = getattr(record, FIELDS, None)
        if fields:
            setattr(
                record,
                FIELDS,
                {k: self.redact(v) if isinstance(v, str) else v for k, v in fields.items()},
            )
        if record.exc_info and record.exc_info[1] is not None:
            # Tracebacks of HTTP libraries quote URLs: the line carries the redacted summary,
            # and at log.level debug the redacted traceback too, as one field of the same line.
            exc = record.exc_info[1]
            record.msg = f"{record.msg}: {self.redact(type(exc).__name__ + ': ' + str(exc))}"
            if logging.getLogger(record.name).isEnabledFor(logging.DEBUG):
                text = "".join(traceback.format_exception(*record.exc_info)).rstrip()
                fields = dict(getattr(record, FIELDS, None) or {})
                fields["traceback"] = self.redact(text)
                setattr(record, FIELDS, fields)
            record.exc_info, record.exc_text = None, None
        return True


def install_redaction(redact: Redactor, logger: str = "guardian") -> None:
    """Redact the secrets `redact` knows now from every line of `logger`'s handlers."""
    for handler in logging.getLogger(logger).handlers:
        filters = [f for f in handler.filters if isinstance(f, RedactingFilter)]
        if filters:
            filters[0].redact.update(redact)
        else:
            handler.addFilter(RedactingFilter(redact))

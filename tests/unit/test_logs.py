"""Every line on stderr is Guardian's format: libraries' records and uncaught exceptions too."""

from __future__ import annotations

import json
import logging
import sys
import threading

from guardian.logs import setup_logging


def _boom() -> None:
    raise RuntimeError("worker broke")


def test_a_library_warning_and_a_dying_thread_are_one_formatted_line_each(capsys):
    setup_logging("info", "text")

    logging.getLogger("apscheduler.scheduler").warning(
        'Execution of job "Daemon.sweep_job" skipped: maximum number of running instances'
    )
    logging.getLogger("waitress.queue").warning("Task queue depth is 3")  # noise: dropped
    worker = threading.Thread(target=_boom, name="worker")
    worker.start()
    worker.join()
    try:
        raise ValueError("at top level")
    except ValueError:
        sys.excepthook(*sys.exc_info())  # type: ignore[arg-type]

    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3, lines
    assert all(line.startswith("ts=") for line in lines), lines
    assert "logger=apscheduler.scheduler" in lines[0] and "skipped" in lines[0]
    # The redacting filter folds the exception into the message: one line, secrets masked.
    assert "thread=worker" in lines[1] and "RuntimeError: worker broke" in lines[1]
    assert 'level=critical msg="uncaught exception: ValueError: at top level"' in lines[2]


def test_a_library_record_in_json_names_its_logger(capsys):
    setup_logging("info", "json")

    logging.getLogger("waitress").error("Socket error")

    doc = json.loads(capsys.readouterr().err)
    assert doc["logger"] == "waitress" and doc["msg"] == "Socket error"


SECRET = "hunter2-s3cr3t-token"


def _fail_with_secrets() -> None:
    try:
        raise ConnectionError(f"POST https://user:{SECRET}@hooks.example/x refused")
    except ConnectionError as exc:
        raise RuntimeError(f"job failed with token={SECRET}") from exc


def _job_failure(level: str, fmt: str, capsys) -> list[str]:  # type: ignore[no-untyped-def]
    from guardian.core.redaction import Redactor
    from guardian.logs import install_redaction

    setup_logging(level, fmt)
    redact = Redactor()
    redact.add(SECRET)
    install_redaction(redact)
    try:
        _fail_with_secrets()
    except RuntimeError:
        logging.getLogger("guardian.daemon").exception("sweep failed")
    return capsys.readouterr().err.splitlines()


def test_a_failing_job_logs_one_line_and_at_debug_its_redacted_traceback(capsys):
    [line] = _job_failure("info", "text", capsys)
    assert "sweep failed: RuntimeError" in line and "traceback=" not in line
    [line] = _job_failure("debug", "text", capsys)
    assert "sweep failed: RuntimeError" in line and "traceback=" in line
    assert "_fail_with_secrets" in line and "ConnectionError" in line  # the chain, frames too
    [line] = _job_failure("debug", "json", capsys)
    doc = json.loads(line)
    assert doc["traceback"].startswith("Traceback (most recent call last)")
    assert "raise RuntimeError" in doc["traceback"]


def test_a_secret_in_an_exception_never_reaches_the_log_at_any_level(capsys):
    for level in ("debug", "info", "warning", "error"):
        for fmt in ("text", "json"):
            lines = _job_failure(level, fmt, capsys)
            assert lines and all(SECRET not in line for line in lines), (level, fmt)

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

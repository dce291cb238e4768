"""Times an attacker writes into the API's query (issue 64): the calendar's edge, forms that are
not RFC 3339. Against a real server on 127.0.0.1 with reads open to anyone: each is a 400 that
names the parameter, in one line, and not one of them writes an error line to the log."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from guardian.entrypoints.daemon import Daemon
from guardian.entrypoints.http_server import HttpServer
from tests.app import make_app
from tests.faults.raw_http import exchange, request


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp: Path = tmp_path_factory.mktemp("time-doors")
    t = make_app(tmp, daemon=True, api={"public_reads": True})
    daemon = Daemon(t.app)
    daemon.sweep()
    http = HttpServer("127.0.0.1:0", daemon.routes())
    http.start()
    host, port = http.address
    yield f"http://{host}:{port}"
    http.stop()
    t.app.edges.close()


def ask(url: str, target: str, caplog: pytest.LogCaptureFixture) -> tuple[int, dict[str, str]]:
    """The status and JSON answer of one GET; fails on any error-level record it caused."""
    with caplog.at_level(logging.INFO, logger="guardian"):
        [reply], _ = exchange(url, request("GET", target, Connection="close"))
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], errors
    assert reply.headers["content-type"] == "application/json"
    return reply.status, reply.json()


# As they stand in the query string: `%2B` is a `+`; a bare `+` arrives as a space.
NOT_PLACEABLE = [
    "0001-01-01T00:00:00%2B01:00",  # before the first moment a datetime holds, in UTC
    "0001-01-01T00:00:00+01:00",  # the same, its `+` left unencoded
    "9999-12-31T23:59:59-01:00",  # after the last
    "2026-W49-1T00:00Z",  # ISO 8601 week date
    "20261207T040000Z",  # ISO 8601 basic format
    "2026-12-07",  # a date
    "2026-12-07T04:00",  # no seconds, no offset
    "2026-12-07T04:00Z",  # no seconds
    "2026-12-07T04:00:00",  # no offset: which time?
    "2026-12-07T04:00:00,5Z",  # a decimal comma
    "2026-12-07T04:00:00.Z",  # a point without digits
    "2026-12-07T04:00:00%2B0100",  # an offset without its colon
    "2026-12-07T04:00:00%2B24:00",  # an offset of a day
    "2026-02-30T04:00:00Z",  # no such day
    "2026-12-07T24:00:00Z",  # no such hour
    "%EF%BC%92026-12-07T04:00:00Z",  # a full-width digit
    "2026-12-07T04:00:00Z%20",  # something after the offset
    "0000-01-01T00:00:00Z",  # no year zero
]


@pytest.mark.parametrize("since", NOT_PLACEABLE)
def test_a_time_that_cannot_be_placed_is_a_400_naming_since_and_logs_no_error(
    url: str, since: str, caplog: pytest.LogCaptureFixture
) -> None:
    status, doc = ask(url, f"/api/v1/events?since={since}", caplog)
    assert status == 400 and set(doc) == {"error"}
    assert doc["error"].startswith("since") and "\n" not in doc["error"]


def test_a_thousand_times_at_the_edge_write_no_error_line(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    raw = b"".join(
        request("GET", "/api/v1/events?since=9999-12-31T23:59:59-01:00") for _ in range(1000)
    )
    with caplog.at_level(logging.INFO, logger="guardian"):
        replies, _ = exchange(url, raw + request("GET", "/healthz", Connection="close"))
    assert [r.status for r in replies] == [400] * 1000 + [200]
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


PLACEABLE = [
    "2026-12-07T04:00:00Z",
    "2026-12-07t04:00:00z",  # RFC 3339 allows both letters in lower case
    "2026-12-07%2004:00:00Z",  # and a space between date and time
    "2026-12-07T04:00:00%2B01:00",
    "2026-12-07T04:00:00+01:00",  # the `+` left unencoded
    "2026-12-07%2004:00:00+01:00",  # a space between, and the `+` left unencoded
    "2026-12-07T04:00:00-00:00",
    "2026-12-07T04:00:00.5Z",
    "2026-12-07T04:00:00.123456789-05:30",  # beyond microseconds: cut, not refused
    "2016-12-31T23:59:60Z",  # a leap second
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59.999999Z",
    "0001-01-01T00:00:00-01:00",  # at the edge, and inside it once in UTC
]


@pytest.mark.parametrize("since", PLACEABLE)
def test_every_rfc3339_time_is_answered(
    url: str, since: str, caplog: pytest.LogCaptureFixture
) -> None:
    status, doc = ask(url, f"/api/v1/events?since={since}", caplog)
    assert status == 200 and set(doc) == {"events", "next"}, doc


@pytest.mark.parametrize(
    ("target", "named"),
    [
        ("/api/v1/actions?since=99999999999999999999d", "since"),
        ("/api/v1/actions?since=1e309s", "since"),
        ("/api/v1/actions?since=0001-01-01T00:00:00Z", "since"),
        ("/api/v1/events?limit=%EF%BC%91", "limit"),
        ("/api/v1/events?since=%EF%BC%91", "since"),
        ("/api/v1/events?since=99999999999999999999", "since"),
        ("/api/v1/incidents?state=%00", "state"),
    ],
)
def test_other_numbers_and_times_in_the_query_are_a_400_naming_them(
    url: str, target: str, named: str, caplog: pytest.LogCaptureFixture
) -> None:
    status, doc = ask(url, target, caplog)
    assert status == 400 and set(doc) == {"error"}, doc
    assert doc["error"].startswith(named) and "\n" not in doc["error"]
    assert len(json.dumps(doc)) < 400

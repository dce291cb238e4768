"""A fuzz pass over what anyone can write (issue 53): the HTTP front (request lines, headers,
bodies, chunked framing) as raw bytes to a real server on 127.0.0.1, the API's query parameters
(cursors, times, limits, filters: issue 64), the label parsers
(durations, sizes, percentages, cron, log patterns, windows) and the incidents' transitions
under any sequence of operations with hostile actors and reasons. No exception escapes, no
state is lost, every bad input gets its one line. The config loader's fuzz is in
test_hostile_input.py. The budget is bounded for CI: GUARDIAN_FUZZ_EXAMPLES scales it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from guardian.core import durations
from guardian.core.detection import log_rules, resources, windows
from guardian.core.detection.crontab import Cron
from guardian.core.incidents import InvalidTransition, by_person, record_recovery, transition
from guardian.core.model import Incident, IncidentState, ProblemType
from guardian.entrypoints.daemon import Daemon
from guardian.entrypoints.http_server import HttpServer
from tests.app import make_app
from tests.fakes import T0

S = IncidentState
SCALE = int(os.environ.get("GUARDIAN_FUZZ_EXAMPLES", "500"))
FUZZ = settings(
    max_examples=SCALE,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
TOKEN = "fuzz-token-0123456789abcdefghijklmnop"

hostile = st.one_of(
    st.text(max_size=80),
    st.text(st.characters(codec="latin-1"), max_size=40),
    st.sampled_from(["", " ", "\n", "\x1b[2J", "0", "-1", "1e309", "nan", "9" * 400, "*/0"]),
)

# -- label parsers --------------------------------------------------------------------------

PARSERS = {
    "duration": (durations.parse_duration, ValueError),
    "size": (resources.parse_size, ValueError),
    "percent": (resources.parse_percent, ValueError),
    "for": (resources.parse_for, ValueError),
    "cron": (Cron.parse, ValueError),
    "log pattern": (log_rules.from_label, log_rules.LogRuleError),
    "window": (lambda v: windows.from_label("app", v), windows.WindowError),
}
cronish = st.lists(
    st.one_of(st.sampled_from(["*", "*/5", "1-3", "0", "59", "7", "MON", "1,2", "32"]), hostile),
    min_size=4,
    max_size=7,
).map(" ".join)


@pytest.mark.parametrize("kind", list(PARSERS))
@FUZZ
@given(value=st.one_of(hostile, cronish))
@example(value="0 0 31 2 *")  # a day no month has: "never happens", not a loop for ever
@example(value="1" * 5000 + "s")
@example(value="* * * * " + "9" * 300)  # found: the cron error quoted the whole field back
def test_any_label_text_parses_or_gets_its_parsers_one_line(kind: str, value: str) -> None:
    parse, error = PARSERS[kind]
    try:
        parse(value)
    except error as exc:
        text = str(exc)
        assert text and "\n" not in text and len(text) <= 400, text
        assert "Traceback" not in text


# -- incidents ------------------------------------------------------------------------------

OPS = st.lists(
    st.tuples(
        st.sampled_from(["transition", "person", "recovery"]),
        st.sampled_from(list(S)),
        hostile,
        hostile,
    ),
    max_size=30,
)


@FUZZ
@given(ops=OPS)
def test_any_sequence_of_transitions_keeps_the_state_machine(ops) -> None:
    current = Incident(7, "host", "app", "cid", ProblemType.UNHEALTHY, S.ACTIVE, T0, T0)
    trail = [current.state]
    now = T0
    for op, to, actor, reason in ops:
        now += timedelta(seconds=1)
        before = current
        try:
            if op == "transition":
                current, _ = transition(current, to, actor, reason, now)
            elif op == "person":
                current = by_person(current, to, actor, reason, now).incident
            else:
                current = record_recovery(current, reason or "recovered", now).incident
        except (InvalidTransition, ValueError) as exc:
            assert current == before  # a refusal changes nothing
            assert "\n" not in str(exc).split(": it is")[0], str(exc)
            continue
        if current.state is before.state:
            assert op == "recovery" and not before.is_open  # a no-op on a closed incident
            continue
        trail.append(current.state)
        if current.state is S.CLOSED:
            assert before.state is S.RESOLVED  # nothing reaches closed but from resolved
        if current.state is S.RESOLVED:
            assert current.resolved_by and current.resolved_at is not None
        assert (current.id, current.container_id, current.opened_at) == (7, "cid", T0)
    assert S.CLOSED not in trail[:-1]  # a closed incident never changes again


# -- the HTTP front -------------------------------------------------------------------------

token = st.text(st.sampled_from("abcdefgGETPOSThxyz/-_."), min_size=1, max_size=12)
header_text = st.text(st.characters(codec="latin-1", exclude_characters="\r\n"), max_size=60)
headers = st.lists(
    st.tuples(
        st.one_of(
            st.sampled_from(
                ["Host", "Content-Length", "Transfer-Encoding", "Authorization", "Cookie",
                 "Origin", "X-Forwarded-For", "Content-Type", "Connection", "Expect"]
            ),
            token,
        ),
        st.one_of(
            header_text,
            st.sampled_from(["chunked", "0", "-1", "5, 6", "localhost", f"Bearer {TOKEN}"]),
        ),
    ),
    max_size=8,
)  # fmt: skip
chunks = st.lists(st.binary(max_size=40), max_size=4).map(
    lambda parts: b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"
)
requests = st.builds(
    lambda method, target, version, hs, body: (
        f"{method} {target} {version}\r\n".encode("latin-1")
        + b"".join(f"{k}: {v}\r\n".encode("latin-1") for k, v in hs)
        + b"\r\n"
        + body
    ),
    st.one_of(st.sampled_from(["GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS"]), token),
    st.one_of(
        st.sampled_from(
            ["/", "/healthz", "/metrics", "/api/v1/incidents", "/api/v1/silences", "/signin",
             "/api/v1/incidents/%ff", "/static/page.js", "*", "/events", "/api/v1/actions?since=x"]
        ),
        st.text(st.characters(codec="ascii", exclude_characters="\r\n "), max_size=60),
    ),
    st.sampled_from(["HTTP/1.1", "HTTP/1.0", "HTTP/2", "HTTP/1.1x", ""]),
    headers,
    st.one_of(st.binary(max_size=200), chunks),
)  # fmt: skip


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    tmp: Path = tmp_path_factory.mktemp("fuzz")
    t = make_app(tmp, daemon=True, env={"GUARDIAN_API_TOKEN": TOKEN})
    t.app.api_token = TOKEN
    daemon = Daemon(t.app)
    daemon.sweep()  # /healthz answers 200 after a first sweep
    http = HttpServer("127.0.0.1:0", daemon.routes())
    http.start()
    yield http.address
    http.stop()
    t.app.edges.close()


def exchange(address: tuple[str, int], raw: bytes) -> bytes:
    """Send `raw` and end the sending side, so the server answers what it has and closes."""
    with socket.create_connection(address, timeout=10) as s:
        s.sendall(raw)
        s.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := s.recv(65536):
            received += chunk
    return received


STATUS_LINE = re.compile(rb"(?:^|\r\n)HTTP/1\.[01] (\d{3}) [^\r\n]*\r\n")


def statuses(data: bytes) -> list[int]:
    """The status of each response in `data`, which must begin with a well-formed one (the
    bodies of HEAD answers and of streams are not framed here: each status line is found)."""
    assert not data or STATUS_LINE.match(data), data[:300]
    assert not data or b"\r\n\r\n" in data, data[:300]
    return [int(m.group(1)) for m in STATUS_LINE.finditer(data)]


@FUZZ
@given(raw=st.one_of(requests, st.binary(max_size=300)))
@example(raw=b"POST /api/v1/silences HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
         b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /healthz HTTP/1.1\r\n\r\n")  # fmt: skip
def test_any_bytes_to_the_port_get_well_formed_answers_and_never_a_500(
    server: tuple[str, int], raw: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="guardian"):
        answers = statuses(exchange(server, raw))
    assert all(100 <= s < 500 or s in (501, 503, 505) for s in answers), answers
    assert not [r for r in caplog.records if r.exc_info or "handler failed" in r.getMessage()]


def test_after_the_fuzz_the_port_still_answers(server: tuple[str, int]) -> None:
    answer = exchange(server, b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert statuses(answer) == [200]


# -- the API's query parameters -------------------------------------------------------------

offsets = st.integers(-24 * 60 + 1, 24 * 60 - 1).map(lambda m: timezone(timedelta(minutes=m)))
moments = st.datetimes(timezones=offsets)


def _written(at: datetime, form: int) -> str:
    """`at` as people and scripts write it: RFC 3339 in its variants, and the near misses."""
    text = at.isoformat(timespec=("auto", "seconds", "milliseconds", "minutes", "hours")[form % 5])
    if form // 5 == 1:
        text = text.replace("+00:00", "Z").replace("T", "t")
    elif form // 5 == 2:
        text = text.replace("T", " ")
    elif form // 5 == 3:
        text = text.replace("-", "")  # the basic format, its offset's sign dropped too
    elif form // 5 == 4:
        text = at.replace(tzinfo=None).isoformat()  # no offset
    return text


times = st.one_of(
    st.builds(_written, moments, st.integers(0, 24)),
    st.builds(lambda at: at.isoformat(), st.datetimes(timezones=st.just(UTC))),
    st.sampled_from(
        ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "2026-W49-1T00:00Z",
         "20261207T040000Z", "2016-12-31T23:59:60Z", "9999-12-31T23:59:60Z", "1h", "1e309s",
         "365d", "366d", "0", "-0", "+1"]
    ),
)  # fmt: skip
numbers = st.one_of(
    st.integers(-(10**20), 10**20).map(str),
    st.sampled_from(["0", "1", "1000", "1001", "9" * 18, "9" * 19, "١", "²", "1.5", " 1"]),
)
values = st.one_of(times, numbers, hostile, st.sampled_from([s.value for s in S]))
queries = st.lists(
    st.tuples(st.sampled_from(["since", "limit", "state", "container", "all", "x"]), values),
    max_size=4,
)
API_PATHS = ["/api/v1/events", "/api/v1/actions", "/api/v1/incidents", "/api/v1/silences",
             "/api/v1/containers", "/api/v1/incidents/1"]  # fmt: skip


def _query(pairs: list[tuple[str, str]], plus_as_space: bool) -> str:
    # A `+` a client left unencoded arrives as a space: both ways are sent.
    safe = "+:" if plus_as_space else ""
    return "&".join(f"{k}={quote(v, safe=safe)}" for k, v in pairs)


@FUZZ
@given(path=st.sampled_from(API_PATHS), pairs=queries, plus_as_space=st.booleans())
@example(path="/api/v1/events", pairs=[("since", "0001-01-01T00:00:00+01:00")], plus_as_space=True)
@example(path="/api/v1/events", pairs=[("since", "9999-12-31T23:59:59-01:00")], plus_as_space=False)
@example(path="/api/v1/incidents", pairs=[("state", "9" * 400)], plus_as_space=False)  # found:
# the error quoted the whole value back (so did actions?since=); no answer repeats what was asked
def test_any_query_to_the_api_is_answered_without_a_500_or_an_error_line(
    server: tuple[str, int],
    path: str,
    pairs: list[tuple[str, str]],
    plus_as_space: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    target = f"{path}?{_query(pairs, plus_as_space)}"
    raw = (
        f"GET {target} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="guardian"):
        answer = exchange(server, raw)
    [status] = statuses(answer)
    assert 200 <= status < 500, (target, answer[:300])
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == [], target
    body = json.loads(answer.partition(b"\r\n\r\n")[2])
    if status >= 400:
        assert set(body) <= {"error", "oldest"}, body
        assert body["error"] and "\n" not in body["error"] and len(body["error"]) < 400, body

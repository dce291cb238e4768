"""Log rules (issue 45): how a rule is read from a label and from config, how a matched line is
quoted, how output is cut into lines and matched within bounds, and how the engine's framing is
taken off the wire."""

from __future__ import annotations

import json
import struct
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from guardian.adapters.engine.log_stream import (
    Dechunker,
    Demultiplexer,
    FollowedLogs,
    WireError,
    stamp_time,
)
from guardian.adapters.re2_patterns import Re2Patterns
from guardian.config import ConfigError, load_settings
from guardian.core.detection import log_rules
from guardian.core.detection.log_rules import (
    MAX_LINE,
    MAX_QUOTE,
    LogRule,
    LogRuleError,
    PatternError,
)
from guardian.core.detection.restart_policy import RestartPolicy
from guardian.core.labels import rules_for
from guardian.service.watchers.log_scan import LineScanner

RE2 = Re2Patterns()


def scanner(*patterns: str) -> LineScanner:
    return LineScanner([(LogRule("*", p), RE2.compile(p)) for p in patterns])


def load(tmp_path: Path, text: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return load_settings(path, env=env or {})


# -- labels -------------------------------------------------------------------------------


def label_rules(labels: dict[str, str]):  # type: ignore[no-untyped-def]
    return rules_for(labels, RestartPolicy(), timedelta(seconds=10), "x")


def test_a_label_adds_a_rule_for_its_own_container() -> None:
    rules = label_rules({"guardian.logs.match": "FATAL|OutOfMemoryError"})
    assert rules.log_rules == (LogRule("*", "FATAL|OutOfMemoryError", "guardian.logs.match"),)
    assert rules.warnings == ()


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("", "expected a non-empty RE2 pattern"),
        ("   ", "expected a non-empty RE2 pattern"),
        ("x" * (log_rules.MAX_PATTERN + 1), f"longer than {log_rules.MAX_PATTERN} characters"),
        ("a\x00b", "NUL"),
    ],
)
def test_a_bad_label_is_one_warning_naming_the_label(value: str, says: str) -> None:
    rules = label_rules({"guardian.logs.match": value})
    assert rules.log_rules == ()
    [warning] = rules.warnings
    assert warning.startswith("label guardian.logs.match=") and says in warning
    assert len(warning) < 200


# -- config -------------------------------------------------------------------------------


def test_config_rules_by_selector_in_the_long_and_the_short_form(tmp_path: Path) -> None:
    long = load(tmp_path, 'logs:\n  rules:\n    - {containers: "api-*", match: "OOM|too many"}\n')
    short = load(tmp_path, 'logs:\n  - {containers: "api-*", match: "OOM|too many"}\n')
    expected = (LogRule("api-*", "OOM|too many", "logs.rules[0]"),)
    assert long["logs.rules"] == short["logs.rules"] == expected
    assert long["logs.rules"][0].applies_to("api-1")
    assert not long["logs.rules"][0].applies_to("db-1")
    assert load(tmp_path, "")["logs.rules"] == ()


def test_config_rules_from_the_environment_as_json(tmp_path: Path) -> None:
    env = {"GUARDIAN_LOGS_RULES": json.dumps([{"containers": "db-*", "match": "FATAL"}])}
    assert load(tmp_path, "", env)["logs.rules"] == (LogRule("db-*", "FATAL", "logs.rules[0]"),)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            'logs: [{match: "(abc"}]',
            "logs.rules[0].match: invalid RE2 pattern: missing ): (abc",
        ),
        ('logs: [{match: "(a)\\\\1"}]', "logs.rules[0].match: invalid RE2 pattern: invalid escape"),
        ('logs: [{containers: "x"}]', "logs.rules[0].match: missing; expected an RE2 pattern"),
        ('logs: [{match: ""}]', "logs.rules[0].match: expected a non-empty RE2 pattern"),
        ('logs: [{match: "a", when: "b"}]', "logs.rules[0].when: unknown key"),
        ("logs: [{match: a, containers: 3}]", "logs.rules[0].containers: expected a container"),
        ("logs: [oops]", "logs.rules[0]: expected a mapping {containers, match}"),
        ("logs: {rules: nope}", "logs.rules = 'nope': expected a list of rules"),
        (
            "logs: [" + ", ".join(["{match: a}"] * 51) + "]",
            "logs.rules: expected a list of at most 50 rules",
        ),
        (
            f"logs: [{{match: {'a' * 513}}}]",
            "logs.rules[0].match: pattern longer than 512 characters",
        ),
    ],
)
def test_a_bad_config_rule_is_one_line_naming_the_key(
    tmp_path: Path, text: str, error: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, text)
    message = str(caught.value)
    assert message.startswith(error), message
    assert "\n" not in message and len(message) < 300


def test_a_bad_environment_value_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"logs.rules \(from GUARDIAN_LOGS_RULES\)"):
        load(tmp_path, "", {"GUARDIAN_LOGS_RULES": "[{"})


def test_an_invalid_pattern_says_why_in_one_line_and_re2_writes_nothing(
    capfd: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(PatternError) as caught:
        Re2Patterns().compile("(abc")
    assert str(caught.value) == "invalid RE2 pattern: missing ): (abc"
    assert capfd.readouterr().err == ""  # RE2's own logging is off


def test_a_pattern_too_large_for_its_memory_is_refused() -> None:
    with pytest.raises(PatternError, match="invalid RE2 pattern"):
        Re2Patterns().compile("((a{100}){100}){100}")


# -- quoting ------------------------------------------------------------------------------


def test_a_quoted_line_is_redacted_stripped_of_control_sequences_and_bounded() -> None:
    line = (
        "\x1b[31mFATAL\x1b[0m: pool exhausted; DB_PASSWORD=hunter2 "
        "url=postgres://app:s3cret@db/x\x07 " + "x" * 1000
    )
    quoted = log_rules.quote(line)
    assert quoted.startswith("FATAL: pool exhausted; DB_PASSWORD=*** url=postgres://***@db/x")
    assert "hunter2" not in quoted and "s3cret" not in quoted
    assert "\x1b" not in quoted and "\x07" not in quoted
    assert len(quoted) == MAX_QUOTE and quoted.endswith("…")


def test_the_detail_names_the_pattern_and_the_rule() -> None:
    rule = LogRule("api-*", "FATAL", "logs.rules[0]")
    assert log_rules.detail(rule, "FATAL: pool exhausted") == (
        "log line matched /FATAL/ (logs.rules[0]): FATAL: pool exhausted"
    )


# -- lines and bounds ----------------------------------------------------------------------


def test_the_first_matching_line_is_found_in_a_block_of_many() -> None:
    found = scanner("^FATAL").feed(b"INFO a\nINFO FATAL b\nFATAL: pool exhausted\nINFO c\n")
    assert found is not None and found[1] == b"FATAL: pool exhausted"


def test_a_line_split_across_blocks_is_matched_whole() -> None:
    s = scanner("pool exhausted$")
    assert s.feed(b"INFO a\nFATAL: pool ex") is None
    found = s.feed(b"hausted\nINFO b\n")
    assert found is not None and found[1] == b"FATAL: pool exhausted"


def test_a_match_never_spans_two_lines() -> None:
    assert scanner(r"a\s+b", "a[^z]*b", "world.FATAL").feed(b"xa\nb\nworld\nFATAL\n") is None


def test_a_line_not_ended_yet_is_not_matched_until_it_ends() -> None:
    s = scanner("done$")
    assert s.feed(b"not done") is None
    assert s.feed(b" yet\n") is None


def test_a_long_line_is_matched_on_its_head_only_and_never_held_whole() -> None:
    s = scanner("TAIL")
    s.feed(b"x" * (MAX_LINE - 10))
    for _ in range(100):  # 6 MiB of one line, fed in 64 KiB blocks
        assert s.feed(b"y" * 65536 + b"TAIL") is None
        assert len(s._carry) < MAX_LINE  # noqa: SLF001 - the bound is the point of the test
    found = s.feed(b"\nTAIL here\n")
    assert found is not None and found[1] == b"TAIL here"


def test_a_match_inside_the_head_of_a_long_line_counts() -> None:
    found = scanner("FATAL").feed(b"FATAL " + b"z" * (3 * MAX_LINE) + b"\n")
    assert found is not None and len(found[1]) == MAX_LINE and found[1].startswith(b"FATAL ")


def test_a_match_past_the_head_of_a_long_line_in_one_block_does_not_count() -> None:
    assert scanner("FATAL").feed(b"z" * (2 * MAX_LINE) + b"FATAL\n") is None


def test_where_a_long_line_was_cut_is_no_line_end() -> None:
    assert scanner("(a+)+$").feed(b"a" * (2 * MAX_LINE)) is None


def test_a_backtracking_pattern_on_a_long_run_of_as_takes_no_time() -> None:
    s = scanner("(a+)+$", "(x+x+)+y")
    started = time.monotonic()
    for _ in range(10):
        assert s.feed(b"a" * 100_000 + b"b\n" + b"x" * 5000 + b"\n") is None
    assert time.monotonic() - started < 1.0


# -- the wire -----------------------------------------------------------------------------


def frame(stream: int, payload: bytes) -> bytes:
    return struct.pack(">BxxxL", stream, len(payload)) + payload


def chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


def test_chunks_and_frames_come_off_whatever_the_splits() -> None:
    wire = chunked(frame(1, b"line one\n"), frame(2, b"oops\n") + frame(1, b"line two\n"))
    for size in (1, 2, 3, 7, 64, len(wire)):
        chunks, frames = Dechunker(), Demultiplexer()
        out = b"".join(
            frames.feed(chunks.feed(wire[i : i + size])) for i in range(0, len(wire), size)
        )
        assert out == b"line one\noops\nline two\n"
        assert chunks.ended


def test_a_stream_that_breaks_its_framing_is_an_error() -> None:
    with pytest.raises(WireError):
        Dechunker().feed(b"zz\r\n")
    with pytest.raises(WireError):
        Dechunker().feed(b"1" * 100)
    with pytest.raises(WireError):
        Demultiplexer().feed(frame(7, b"x"))


def test_a_followed_stream_reads_in_bulk_and_ends_at_the_last_chunk() -> None:
    wire = [chunked(*[frame(1, b"INFO %d\n" % i) for i in range(1000)])]
    finished: list[bool] = []

    def read1(limit: int) -> bytes:
        data, wire[0] = wire[0][:limit], wire[0][limit:]
        return data

    logs = FollowedLogs(
        read1, lambda: None, lambda: finished.append(True), chunked=True, multiplexed=True
    )
    blocks = []
    while block := logs.read(4096):
        blocks.append(block)
    assert b"".join(blocks).count(b"\n") == 1000 and len(blocks) < 10
    assert finished == [True]


def test_a_label_pattern_is_checked_with_the_same_engine_as_config() -> None:
    with pytest.raises(LogRuleError):
        log_rules.from_config({"match": 3}, "[0]")


def test_each_frames_time_is_taken_off_and_the_last_one_kept() -> None:
    wire = frame(1, b"2026-12-04T17:07:05.123456789Z FATAL: pool exhausted\n") + frame(
        2, b"2026-12-04T17:07:06Z oops\n"
    )
    for size in (1, 5, 31, len(wire)):
        frames = Demultiplexer(stamped=True)
        out = b"".join(frames.feed(wire[i : i + size]) for i in range(0, len(wire), size))
        assert out == b"FATAL: pool exhausted\noops\n"
        assert frames.stamp == b"2026-12-04T17:07:06Z"
    assert stamp_time(b"2026-12-04T17:07:05.123456789Z") == datetime(
        2026, 12, 4, 17, 7, 5, 123456, tzinfo=UTC
    )
    with pytest.raises(WireError):
        Demultiplexer(stamped=True).feed(frame(1, b"x" * 100 + b" y\n"))


def test_an_invalid_pattern_from_a_label_is_told_without_its_escape_sequences() -> None:
    with pytest.raises(PatternError) as caught:
        Re2Patterns().compile("\x1b[2J(x")
    assert "\x1b" not in str(caught.value) and str(caught.value).startswith("invalid RE2")


# -- the slots (allot): the operator's rules first, then by name ------------------------------


@pytest.mark.parametrize(
    ("wanted", "slots", "followed"),
    [
        ([("b", False), ("a", False)], 1, ["a"]),
        ([("a", False), ("z", True)], 1, ["z"]),  # the operator's rule outranks any label's
        ([("z", True), ("y", True), ("a", False)], 2, ["y", "z"]),
        ([("a", False)], 0, []),
        ([], 3, []),
    ],
)
def test_slots_go_to_the_operators_rules_first_then_by_name(wanted, slots, followed) -> None:
    given = [log_rules.Wanted(f"{name}-id", name, operator) for name, operator in wanted]
    got, rest = log_rules.allot(given, slots)
    assert [w.name for w in got] == followed
    assert sorted(w.name for w in rest) == sorted(n for n, _ in wanted if n not in followed)


def test_a_rule_is_the_operators_when_any_of_its_rules_comes_from_logs_rules() -> None:
    label = log_rules.from_label("FATAL")
    config = log_rules.from_config({"containers": "api-*", "match": "OOM"}, "logs.rules[0]")
    assert not log_rules.by_operator([label])
    assert log_rules.by_operator([label, config])

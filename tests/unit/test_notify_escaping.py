"""Hostile text in every field of a notification, per channel: the payload each channel builds
carries it as data, never as markup (no mention, no link, no header, no control character), and
within the channel's size limits."""

from __future__ import annotations

import email
import json
import re
from dataclasses import fields, replace
from email import policy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guardian.adapters.notify import discord, slack_blocks
from guardian.adapters.notify.email import compose, header
from guardian.adapters.notify.webhook import WebhookNotifier, document
from guardian.core.outbound.notifications import Kind, Notification, to_dict
from tests.fakes import T0
from tests.messages import slack_mrkdwn, unescaped
from tests.receiver import FakeReceiver
from tests.samples import S

HOSTILE = [
    "<!channel>",
    "<!here>",
    "<!everyone>",
    "<@U024BE7LH>",
    "<#C024BE7LR>",
    "<!subteam^S1>",
    "<https://evil.example/reset|Reset your password>",
    "[Reset your password](https://evil.example/reset)",
    "[x](<https://evil.example>)",
    "@everyone",
    "@here",
    "<@&123456>",
    "```",
    "`",
    "*bold* _it_ ~s~ ||spoiler|| > quote # head",
    "&amp;",
    "&lt;",
    "&",
    "\\",
    "\\\\",
    "\r\n",
    "\nBcc: victim@evil.example\n",
    "\r\nSubject: forged",
    "=?utf-8?b?SGFja2Vk?=",
    "=?iso-8859-1?q?=41?=",
    "\x1b[2J\x1b]0;title\x07",
    "\x00\x07\x08\x7f\x9b",
    "\u202e\u2066",
    "https://evil.example/path",
]
hostile = st.lists(st.one_of(st.sampled_from(HOSTILE), st.text(max_size=40)), max_size=12).map(
    "".join
)
huge = st.builds(lambda piece, n: piece * n, st.sampled_from(HOSTILE), st.integers(1, 3000))
value = st.one_of(hostile, huge)

TEXT_FIELDS = [f.name for f in fields(Notification) if f.type in ("str", str)]
BASE = Notification(Kind.OPENED, 7, "vm1", "web", "unhealthy", "active", T0, id=1)


@st.composite
def notifications(draw: Any) -> Notification:
    changes = {name: draw(value) for name in draw(st.sets(st.sampled_from(TEXT_FIELDS)))}
    kind = draw(st.sampled_from(list(Kind)))
    return replace(BASE, kind=kind, max_attempts=draw(st.integers(0, 5)), **changes)


batches = st.lists(notifications(), min_size=1, max_size=4)
CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
EXAMPLES = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


@EXAMPLES
@given(batches)
def test_slack_shows_hostile_text_as_text(batch: list[Notification]) -> None:
    doc = json.loads(json.dumps(slack_blocks.message(batch)))
    for text in slack_mrkdwn(doc):
        assert "<" not in text and ">" not in text  # no <!channel>, <@U..>, <url|label>
        assert not re.search(r"&(?!amp;|lt;|gt;)", text)
        assert not CONTROLS.search(text)
        assert len(text) <= slack_blocks.TEXT_MAX
    for block in doc["blocks"]:
        if block["type"] == "header":
            assert block["text"]["type"] == "plain_text"
            assert len(block["text"]["text"]) <= slack_blocks.HEADER_MAX
            assert not CONTROLS.search(block["text"]["text"])
        for f in block.get("fields", []):
            assert len(f["text"]) <= slack_blocks.FIELD_MAX
        if block["type"] == "section" and "text" in block:
            text = block["text"]["text"]
            assert len(text) <= slack_blocks.SECTION_MAX
            # The health output stays inside its one fence; nothing else opens one.
            fences = 2 if text.startswith(("*Last health output*", "*Reason*")) else 0
            assert text.count("`" * 3) == fences
    assert doc["unfurl_links"] is False and doc["unfurl_media"] is False
    assert len(doc["blocks"]) <= slack_blocks.MAX_BLOCKS


def test_slack_escapes_the_attack_from_the_issue_and_keeps_it_readable() -> None:
    attack = "<!channel> <@U024BE7LH> <https://evil.example/reset|Reset your password>"
    doc = slack_blocks.message([replace(BASE, detail=attack, next_step=attack)])
    escaped = "&lt;!channel&gt; &lt;@U024BE7LH&gt; &lt;https://evil.example/reset|Reset"
    assert escaped in doc["text"]
    assert all(escaped in t for t in slack_mrkdwn(doc)[-2:])  # the output's fence, Next:


@EXAMPLES
@given(batches)
def test_discord_pings_nobody_and_renders_no_link(batch: list[Notification]) -> None:
    doc = json.loads(json.dumps(discord.message(batch)))
    assert doc["allowed_mentions"] == {"parse": []}
    assert unescaped(doc["content"]) == [] and len(doc["content"]) <= discord.CONTENT_MAX
    [e] = doc["embeds"]
    assert len(e["title"]) <= discord.TITLE_MAX and not CONTROLS.search(e["title"])
    for f in e.get("fields", []):
        assert unescaped(f["value"]) == [] and 0 < len(f["value"]) <= discord.VALUE_MAX
        assert not CONTROLS.search(f["value"])
    if "description" in e:
        assert len(e["description"]) <= discord.DESCRIPTION_MAX
        if len(batch) == 1:
            assert unescaped(e["description"]) == []
        for line in e["description"].split("\n") if len(batch) > 1 else []:
            assert line.startswith("**") and line.endswith("**")  # Guardian's own bold
            assert unescaped(line[2:-2]) == []
    total = len(e["title"]) + len(e.get("description", ""))
    total += sum(len(f["name"]) + len(f["value"]) for f in e.get("fields", []))
    assert total <= 6000  # Discord's limit for one message's embeds


@EXAMPLES
@given(batches)
def test_email_headers_hold_only_what_guardian_wrote(batch: list[Notification]) -> None:
    msg = compose(batch, "guardian@example.org", ["ops@example.org"])
    parsed = email.message_from_bytes(msg.as_bytes(), policy=policy.default)
    assert sorted(parsed.keys()) == sorted(
        ["Subject", "From", "To", "Content-Type", "Content-Transfer-Encoding", "MIME-Version"]
    )
    assert parsed["From"] == "guardian@example.org" and parsed["To"] == "ops@example.org"
    subject = str(parsed["Subject"])
    # No encoded-word in it was decoded into other text (folding may move a space).
    assert "".join(subject.split()) == "".join(str(msg["Subject"]).split())
    assert "\n" not in subject and "\r" not in subject and "=?" not in str(msg["Subject"])
    assert not CONTROLS.search(subject) and len(str(msg["Subject"])) <= 200
    body = parsed.get_content()
    assert not CONTROLS.search(body.replace("\r", ""))


def test_a_long_subject_with_letters_beyond_ascii_reads_back_as_written() -> None:
    """The standard library's folder once cut an encoded-word in the middle of an escape."""
    n = Notification(
        Kind.OPENED,
        7,
        "*bold* _it_ ~s~ ||spoiler|| > quote # head<!here><!here>https://evil.example/path\u00a1",
        "web",
        "unhealthy",
        "active",
        T0,
    )
    for batch in ([n], [n, replace(n, host="\u00a1")], [replace(n, host="\U0001f600" * 200)]):
        msg = compose(batch, "guardian@example.org", ["ops@example.org"])
        raw = msg.as_bytes()
        parsed = email.message_from_bytes(raw, policy=policy.default)
        assert str(parsed["Subject"]) == str(msg["Subject"])
        assert all(len(line) <= 998 for line in raw.split(b"\n"))


def test_an_encoded_word_in_container_text_is_shown_as_written() -> None:
    assert header("web =?utf-8?b?SGFja2Vk?=\r\nBcc: x") == "web = ?utf-8?b?SGFja2Vk?= Bcc: x"


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(batches)
def test_the_webhook_carries_every_value_unchanged(batch: list[Notification]) -> None:
    rx = FakeReceiver()
    try:
        assert WebhookNotifier(rx.url("/h"), None, 5 * S).send(batch).ok
        sent = rx.requests[0].json["notifications"]
    finally:
        rx.stop()
    assert sent == [document(n) for n in batch]
    for d, n in zip(sent, batch, strict=True):  # data, not markup: JSON escapes it
        expected = {k: v for k, v in to_dict(n).items() if k not in ("receivers", "held")}
        if not n.channel:
            del expected["channel"]  # only a channel failure names one
        assert d == expected

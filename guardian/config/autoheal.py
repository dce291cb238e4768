"""docker-autoheal's variables read as Guardian's own keys (`compat: autoheal`, or found when
an AUTOHEAL_* variable is set), so a Compose file written for willfarrell/autoheal runs Guardian.

Each variable becomes the value of one Guardian key, parsed and bounded like that key (an error
names the variable); one line per mapping is logged at start. Guardian's own safety (cooldown,
attempts, host budget, storm breaker) applies on top: such a user gets fewer restarts, not more.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

MODES = ("none", "autoheal")
# docker-autoheal's defaults where Guardian's differ and the variable is absent.
DEFAULT_LABEL = "autoheal"
DEFAULT_JSON_KEY = "content"
# What autoheal reads, in the order the start-up log names them.
VARIABLES = (
    "AUTOHEAL_CONTAINER_LABEL",
    "AUTOHEAL_INTERVAL",
    "AUTOHEAL_START_PERIOD",
    "AUTOHEAL_DEFAULT_STOP_TIMEOUT",
    "AUTOHEAL_ONLY_MONITOR_RUNNING",
    "DOCKER_SOCK",
    "CURL_TIMEOUT",
    "WEBHOOK_URL",
    "WEBHOOK_JSON_KEY",
    "APPRISE_URL",
    "POST_RESTART_SCRIPT",
)
_TRUE = frozenset({"true", "yes", "on", "1"})


@dataclass(frozen=True)
class Mapped:
    """One Guardian key's value from an autoheal variable: `raw` is parsed by the key itself."""

    key: str  # "section.key"
    raw: str | list[dict[str, object]]
    source: str  # the variable it came from, for errors and the log
    shown: str  # the value as the log line shows it (a secret's variable name, never the secret)
    note: str = ""
    default: bool = False  # autoheal's default, not a variable: the config file's value wins


@dataclass(frozen=True)
class Compat:
    values: tuple[Mapped, ...] = ()
    lines: tuple[str, ...] = ()  # one log line each, at start


def detected(env: Mapping[str, str]) -> bool:
    """Whether docker-autoheal's own variables are present (AUTOHEAL_*)."""
    return any(name.startswith("AUTOHEAL_") for name in env)


def _seconds(value: str) -> str:
    """autoheal's whole seconds as a Guardian duration ("5" -> "5s"); other text is passed on,
    so the key's own parser refuses it with the variable's name."""
    v = value.strip()
    return f"{v}s" if v.isdigit() else v


def _socket(value: str) -> str:
    v = value.strip()
    if v.startswith(("unix://", "tcp://", "http://", "https://", "ssh://")):
        return v
    return f"unix://{v}"


def _watching(env: Mapping[str, str]) -> list[Mapped]:
    """The keys for what autoheal watches and how it reaches the engine, in the log's order."""
    out: list[Mapped] = []
    label = env.get("AUTOHEAL_CONTAINER_LABEL", "").strip()
    if label:
        out.append(Mapped("watch.label", label, "AUTOHEAL_CONTAINER_LABEL", label))
    else:
        out.append(
            Mapped(
                "watch.label",
                DEFAULT_LABEL,
                "AUTOHEAL_CONTAINER_LABEL",
                DEFAULT_LABEL,
                "autoheal's default",
                default=True,
            )
        )
    for var, key in (
        ("AUTOHEAL_INTERVAL", "watch.interval"),
        ("AUTOHEAL_DEFAULT_STOP_TIMEOUT", "restart.stop_timeout"),
        ("CURL_TIMEOUT", "docker.timeout"),
    ):
        if var in env:
            out.append(Mapped(key, _seconds(env[var]), var, _seconds(env[var])))
    if "AUTOHEAL_START_PERIOD" in env:
        value = _seconds(env["AUTOHEAL_START_PERIOD"])
        out.append(
            Mapped(
                "watch.start_grace",
                value,
                "AUTOHEAL_START_PERIOD",
                value,
                "no judgement of a container for this long after it starts",
            )
        )
    if env.get("AUTOHEAL_ONLY_MONITOR_RUNNING", "").strip().lower() in _TRUE:
        every = " ".join(str(code) for code in range(256))
        out.append(
            Mapped(
                "restart.ignore_exit_codes",
                every,
                "AUTOHEAL_ONLY_MONITOR_RUNNING",
                "0..255",
                "exited containers are left alone; running unhealthy ones are healed",
            )
        )
    if env.get("DOCKER_SOCK", "").strip():
        url = _socket(env["DOCKER_SOCK"])
        out.append(Mapped("docker.url", url, "DOCKER_SOCK", url))
    return out


def _telling(env: Mapping[str, str]) -> list[Mapped]:
    """The keys for who hears of a restart and what runs after it, in the log's order."""
    out: list[Mapped] = []
    if env.get("WEBHOOK_URL", "").strip():
        # The secret stays where it is: Guardian reads it from that variable.
        out.append(
            Mapped(
                "notify.webhook_url_env",
                "WEBHOOK_URL",
                "WEBHOOK_URL",
                "WEBHOOK_URL",
                "the URL is read from WEBHOOK_URL",
            )
        )
        key = env.get("WEBHOOK_JSON_KEY", "").strip() or DEFAULT_JSON_KEY
        out.append(Mapped("notify.webhook_json_key", key, "WEBHOOK_JSON_KEY", key))
    if env.get("APPRISE_URL", "").strip():
        out.append(
            Mapped(
                "notify.apprise_urls_env",
                "APPRISE_URL",
                "APPRISE_URL",
                "APPRISE_URL",
                "the URLs are read from APPRISE_URL",
            )
        )
    if env.get("POST_RESTART_SCRIPT", "").strip():
        script = env["POST_RESTART_SCRIPT"].strip()
        hook: dict[str, object] = {"name": "post_restart_script", "argv": [script]}
        out.append(
            Mapped(
                "remediation.hooks",
                [hook],
                "POST_RESTART_SCRIPT",
                f"[{{name: post_restart_script, argv: [{script[:80]}]}}]",
                "run after each restart's verdict; the container's name and id come in"
                " GUARDIAN_CONTAINER and GUARDIAN_CONTAINER_ID, not as arguments",
            )
        )
    return out


def _log_lines(env: Mapping[str, str], values: list[Mapped]) -> list[str]:
    """One line per mapping, then one per AUTOHEAL_* variable Guardian does not know."""
    lines = [
        f"compat autoheal: {m.source}="
        + ("(unset)" if m.source not in env else _quoted(m.source, env))
        + f" -> {m.key}={m.shown}"
        + (f" ({m.note})" if m.note else "")
        for m in values
    ]
    for name in sorted(env):
        if name.startswith("AUTOHEAL_") and name not in VARIABLES:
            lines.append(
                f"compat autoheal: {name} is not a docker-autoheal variable Guardian knows; ignored"
                " (Guardian's keys are listed in docs/configuration.md)"
            )
    return lines


def autoheal(env: Mapping[str, str]) -> Compat:
    """The keys docker-autoheal's variables in `env` stand for, with one log line each."""
    out = _watching(env) + _telling(env)
    return Compat(tuple(out), tuple(_log_lines(env, out)))


def _quoted(name: str, env: Mapping[str, str]) -> str:
    """What the log shows of a variable's value: never a secret (the URLs)."""
    if name in ("WEBHOOK_URL", "APPRISE_URL"):
        return "(set)"
    return env[name][:80]

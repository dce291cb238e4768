"""`guardian token new`: print a fresh API token (64 hex characters, 256 bits from the
operating system's generator), long enough for api.token_file or api.token_env.
"""

from __future__ import annotations

import argparse
import secrets
from collections.abc import Callable
from typing import Any

TOKEN_BYTES = 32  # printed as 64 hex characters: twice the shortest token Guardian accepts


def new_token() -> str:
    return secrets.token_hex(TOKEN_BYTES)


def cmd_token_new(args: argparse.Namespace) -> int:
    print(new_token())
    return 0


def register(sub: Any, cfg: Callable[[argparse.ArgumentParser], argparse.ArgumentParser]) -> None:
    token = sub.add_parser("token", help="make an API token")
    verbs = token.add_subparsers(dest="verb", required=True, metavar="VERB")
    new = verbs.add_parser(
        "new", help="print a fresh API token, e.g. guardian token new > /etc/guardian/api-token"
    )
    new.set_defaults(handler=cmd_token_new)

"""Accounts and a key's binding to them (issue #30): the names, and the one text form the
command line, the database and the owner's views share.

An *account* is one login of a provider's CLI (``claude`` logged in as Alice, as Bob…). Every
provider has the account ``default``: the login it had before accounts existed. A key may be
*bound* to accounts, per provider, in order: ``claude:alice,claude:alice-work,codex:alice``.
A bound key uses only those accounts of that provider; for a provider it has no binding for,
it uses the accounts that serve every key. Pure data; no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

#: The account every provider has: today's single login.
DEFAULT_ACCOUNT: Final = "default"
#: An account's name: it names a directory and appears in headers, logs and metric labels.
ACCOUNT_NAME: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
_PROVIDER_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")

#: A key's binding: ``(provider, account)`` pairs in the order they are tried.
Binding = tuple[tuple[str, str], ...]


def valid_account_name(name: str) -> bool:
    """Whether ``name`` may name an account: 1–32 of lower-case letters, digits, ``-`` and
    ``_``, starting with a letter or digit."""
    return ACCOUNT_NAME.fullmatch(name) is not None


def parse_binding(text: str) -> Binding:
    """``"claude:alice,codex:work"`` as pairs, in order, repeats dropped; an empty text is
    no binding. Raises ``ValueError`` naming the bad part."""
    pairs: list[tuple[str, str]] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        provider, sep, account = part.partition(":")
        if not sep or not _PROVIDER_NAME.fullmatch(provider) or not valid_account_name(account):
            raise ValueError(f"`{part}` is not PROVIDER:ACCOUNT (an account name is 1-32 of "
                             "a-z, 0-9, - and _)")
        if (provider, account) not in pairs:
            pairs.append((provider, account))
    return tuple(pairs)


def format_binding(binding: Iterable[tuple[str, str]]) -> str:
    """The text :func:`parse_binding` reads."""
    return ",".join(f"{provider}:{account}" for provider, account in binding)


def bound_accounts(binding: Binding, provider: str) -> tuple[str, ...] | None:
    """The accounts ``binding`` names for ``provider``, in order; ``None`` when it names
    none (the key is not bound for that provider)."""
    found = tuple(account for p, account in binding if p == provider)
    return found or None


def slot_name(provider: str, account: str) -> str:
    """The name of the actor serving ``provider``'s ``account``: the provider's own name for
    the default account (so a config without accounts names everything as before), else
    ``provider@account``."""
    return provider if account == DEFAULT_ACCOUNT else f"{provider}@{account}"


def split_slot(slot: str) -> tuple[str, str]:
    """``(provider, account)`` of a :func:`slot_name`."""
    provider, _, account = slot.partition("@")
    return provider, account or DEFAULT_ACCOUNT

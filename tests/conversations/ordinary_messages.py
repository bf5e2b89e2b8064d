"""Ordinary technical messages, written for these tests (not copied from anywhere): URLs
without a password, e-mail addresses, shell, SQL, code in a dozen languages, logs, stack
traces, configuration, hashes, uuids, public keys' fingerprints, credential *templates*
and masked credentials. The secret detector must leave every one alone. One message per
block of `ordinary_messages.txt`, blocks separated by a line `%%`; add to it whenever an
ordinary message is found masked."""

from __future__ import annotations

from pathlib import Path

MESSAGES: list[str] = [
    block.strip("\n")
    for block in (Path(__file__).with_name("ordinary_messages.txt").read_text().split("\n%%\n"))
    if block.strip()
]

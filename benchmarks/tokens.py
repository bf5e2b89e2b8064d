"""API token authentication: one `authenticate_credentials(key)` call, hashed tokens
(tokens app: SHA-256 digest, one indexed read) beside what they replaced (DRF's plain
`Token`, the baseline, measured in the same run) and beside a check through Django's
password hasher (PBKDF2, what a hashed token on Django's hashers would cost)."""

from __future__ import annotations

import time

from django.contrib.auth.hashers import check_password, make_password
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token

from benchmarks.conversations import bench_user
from benchmarks.harness import BenchContext, BenchRow, benchmark, p50, percentile
from tokens.authentication import ApiTokenAuthentication
from tokens.services import token_rotate


def _samples(call, count: int) -> list[float]:
    call()  # warm
    seconds = []
    for _ in range(count):
        start = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - start)
    return seconds


@benchmark("tokens")
def token_auth(ctx: BenchContext) -> list[BenchRow]:
    user = bench_user()
    count = ctx.n(2000)
    hashed_key = token_rotate(user=user, name="bench-auth").key
    # The baseline: a plain-text DRF token, as stored before hashing (deleted after).
    Token.objects.filter(user=user).delete()
    plain = Token.objects.create(user=user)
    try:
        baseline = _samples(
            lambda: TokenAuthentication().authenticate_credentials(plain.key), count
        )
    finally:
        plain.delete()
    hashed = _samples(lambda: ApiTokenAuthentication().authenticate_credentials(hashed_key), count)
    encoded = make_password(hashed_key)
    pbkdf2 = _samples(lambda: check_password(hashed_key, encoded), max(5, ctx.n(20)))
    rows = []
    for name, samples, detail in (
        ("token auth, plain DRF token (before), p50", baseline, "baseline: key stored as issued"),
        ("token auth, hashed token (after), p50", hashed, "SHA-256 digest, one indexed read"),
        ("token check, Django PBKDF2 hasher, p50", pbkdf2, "password-hasher alternative"),
    ):
        rows.append(
            BenchRow(
                name,
                p50(samples) * 1e6,
                "µs",
                "≤ 2× before" if "after" in name else "",
                f"{len(samples):,} calls, p99 {percentile(samples, 0.99) * 1e6:,.0f} µs; {detail}",
            )
        )
    return rows

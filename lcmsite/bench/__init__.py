"""Benchmark harness: each module registers rows; `manage.py lcm_bench` prints the table.

A benchmark is a function `(ctx: BenchContext) -> list[BenchRow]` registered with
`@benchmark("name")`. Later subsystems add their own modules to `BENCH_MODULES`.
"""

"""Exploration summaries: realistic large samples of each type, fallbacks, attacks, budgets.

The samples are generated here, deterministically; each summary must name the right keys,
columns or definitions and stay within 200-500 tokens (by `estimate_tokens`).
"""

from __future__ import annotations

import json
import time

import pytest

from core.token_estimate import estimate_tokens
from largefiles import explore
from largefiles.explore import count_lines

# ── Samples ──────────────────────────────────────────────────────────────────


def json_records(count: int = 450) -> str:
    """An array of user records, about 30,000 tokens for the default count."""
    cities = ["Oslo", "Lima", "Pune", "Kyoto", "Accra"]
    records = []
    for i in range(count):
        record = {
            "id": i + 1,
            "name": f"User {i + 1}",
            "email": f"user{i + 1}@example.com",
            "address": {"street": f"{i} Main St", "city": cities[i % 5], "zip": f"{10000 + i}"},
            "tags": ["alpha", "beta", "gamma"][: i % 4],
            "active": i % 2 == 0,
            "balance": round(i * 1.25, 2),
        }
        if i % 10 == 0:
            record["referrer"] = None
        records.append(record)
    return json.dumps(records, indent=2)


def json_config() -> str:
    """A top-level object: settings, a map keyed by id, and a deep list."""
    document = {
        "version": "2.4.1",
        "generated_at": "2026-02-17T10:00:00Z",
        "settings": {"retries": 3, "timeout_seconds": 30.5, "features": {"beta": True}},
        "users_by_id": {f"u{i:04d}": {"name": f"N{i}", "roles": ["admin"]} for i in range(400)},
        "matrix": [[[i, j] for j in range(20)] for i in range(50)],
    }
    return json.dumps(document, indent=1)


def csv_orders(rows: int = 5000, delimiter: str = ",") -> str:
    header = ["order_id", "customer", "order_date", "amount", "currency", "shipped", "notes"]
    lines = [delimiter.join(header)]
    for i in range(rows):
        customer = f'"Customer {i % 97}, Ltd"' if delimiter == "," else f"Customer {i % 97}, Ltd"
        notes = "" if i % 7 else "gift wrap"
        lines.append(
            delimiter.join(
                [
                    str(100000 + i),
                    customer,
                    f"2025-{(i % 12) + 1:02d}-{(i % 28) + 1:02d}",
                    f"{(i * 7.31) % 500:.2f}",
                    ["EUR", "USD", "NOK"][i % 3],
                    ["true", "false"][i % 2],
                    notes,
                ]
            )
        )
    return "\n".join(lines) + "\n"


def yaml_compose(services: int = 300) -> str:
    lines = ["# deployment", "version: '3.9'", "x-defaults: &defaults", "  restart: always", ""]
    lines.append("services:")
    for i in range(services):
        lines += [
            f"  svc{i}:",
            "    <<: *defaults",
            f"    image: registry.example.com/team/svc{i}:1.{i}",
            "    ports:",
            f"      - '{8000 + i}:80'",
            "    environment:",
            f"      LOG_LEVEL: {'debug' if i % 2 else 'info'}",
            f"      WORKERS: {i % 8 + 1}",
        ]
    lines += ["volumes:", "  data: {}", "networks:", "  default:", "    driver: bridge"]
    return "\n".join(lines) + "\n"


def xml_catalog(books: int = 2500) -> str:
    parts = ['<?xml version="1.0" encoding="UTF-8"?>', '<catalog version="3" xmlns:dc="urn:dc">']
    for i in range(books):
        parts.append(
            f'  <book id="b{i}" lang="{["en", "no", "fr"][i % 3]}">'
            f"<title>Book number {i}</title><author>Author {i % 40}</author>"
            f'<price currency="EUR">{10 + i % 30}.99</price><dc:subject>topic {i % 9}</dc:subject>'
            "</book>"
        )
    parts.append("</catalog>")
    return "\n".join(parts) + "\n"


def python_module(functions: int = 40) -> str:
    parts = [
        '"""Billing engine: invoices, payments and the ledger."""',
        "",
        "from __future__ import annotations",
        "",
        "import dataclasses",
        "import logging",
        "from decimal import Decimal",
        "from typing import Any, Iterable",
        "",
        "from .models import Invoice, Payment",
        "",
        "LOG = logging.getLogger(__name__)",
        "DEFAULT_CURRENCY = 'EUR'",
        "",
        "",
        "@dataclasses.dataclass(frozen=True)",
        "class Money:",
        "    amount: Decimal",
        "    currency: str = DEFAULT_CURRENCY",
        "",
        "    def add(self, other: Money) -> Money:",
        "        return Money(self.amount + other.amount, self.currency)",
        "",
        "",
        "class Ledger(Iterable[Payment]):",
        '    """Every payment, in order."""',
        "",
        "    def __init__(self, payments: list[Payment] | None = None) -> None:",
        "        self.payments = payments or []",
        "",
        "    async def settle(self, invoice: Invoice, *, partial: bool = False) -> Money:",
        "        raise NotImplementedError",
        "",
    ]
    for i in range(functions):
        parts += [
            "",
            f"def compute_total_{i}(items: list[dict[str, Any]], rate: float = 0.{i % 10}) -> Decimal:",
            f'    """Total number {i}."""',
            "    total = Decimal(0)",
        ]
        parts += [f"    total += Decimal(items[{j}]['price']) * Decimal(rate)" for j in range(60)]
        parts += ["    return total", ""]
    parts += ["", "if __name__ == '__main__':", "    print(compute_total_0([]))", ""]
    return "\n".join(parts)


def go_file(functions: int = 60) -> str:
    parts = [
        "// Package store keeps orders.",
        "package store",
        "",
        "import (",
        '\t"context"',
        '\t"database/sql"',
        '\tlog "github.com/sirupsen/logrus"',
        ")",
        "",
        "const MaxOrders = 1000",
        "",
        "type Order struct {",
        "\tID    int64",
        "\tTotal float64",
        "}",
        "",
        "type Store interface {",
        "\tGet(ctx context.Context, id int64) (*Order, error)",
        "}",
        "",
        "func NewStore(db *sql.DB) *SQLStore {",
        "\treturn &SQLStore{db: db}",
        "}",
        "",
        "func (s *SQLStore) Get(ctx context.Context, id int64) (*Order, error) {",
        "\treturn nil, nil",
        "}",
    ]
    for i in range(functions):
        parts += ["", f"func handler{i}(ctx context.Context, w Writer, r *Request) error {{"]
        parts += [f'\tlog.Info("step {j}")' for j in range(40)]
        parts += ["\treturn nil", "}"]
    return "\n".join(parts) + "\n"


def typescript_file(functions: int = 50) -> str:
    parts = [
        "import { Injectable } from '@angular/core';",
        "import type { User } from './models';",
        "import {",
        "  map,",
        "  filter,",
        "} from 'rxjs/operators';",
        "const fs = require('fs');",
        "",
        "export interface Session {",
        "  id: string;",
        "}",
        "",
        "export type Role = 'admin' | 'user';",
        "",
        "export class UserService {",
        "  constructor(private http: HttpClient) {}",
        "",
        "  async getUser(id: string): Promise<User> {",
        "    return this.http.get(id);",
        "  }",
        "}",
        "",
        "export const toName = (user: User): string => user.name;",
    ]
    for i in range(functions):
        parts += ["", f"export async function load{i}(id: string, retries = 3): Promise<void> {{"]
        parts += [f"  await step({j});" for j in range(50)]
        parts += ["}"]
    return "\n".join(parts) + "\n"


def rust_file(functions: int = 50) -> str:
    parts = [
        "use std::collections::HashMap;",
        "use serde::{Deserialize, Serialize};",
        "",
        "pub const LIMIT: usize = 10;",
        "",
        "#[derive(Debug, Serialize, Deserialize)]",
        "pub struct Account {",
        "    pub id: u64,",
        "}",
        "",
        "pub enum Event { Opened, Closed }",
        "",
        "pub trait Repository {",
        "    fn find(&self, id: u64) -> Option<Account>;",
        "}",
        "",
        "impl Repository for MemoryRepo {",
        "    fn find(&self, id: u64) -> Option<Account> {",
        "        self.items.get(&id).cloned()",
        "    }",
        "}",
    ]
    for i in range(functions):
        parts += [
            "",
            f"pub async fn process_{i}(map: &mut HashMap<u64, Account>) -> Result<(), Error> {{",
        ]
        parts += [f"    map.remove(&{j});" for j in range(50)]
        parts += ["    Ok(())", "}"]
    return "\n".join(parts) + "\n"


def java_file(methods: int = 60) -> str:
    parts = [
        "package com.example.billing;",
        "",
        "import java.util.List;",
        "import java.util.Map;",
        "import static java.util.Objects.requireNonNull;",
        "",
        "public class InvoiceService extends BaseService implements Closeable {",
        "    private final Map<String, Invoice> cache;",
        "",
        "    public InvoiceService(Map<String, Invoice> cache) {",
        "        this.cache = cache;",
        "    }",
    ]
    for i in range(methods):
        parts += [
            "",
            f"    public List<Invoice> findByCustomer{i}(String customerId, int limit) {{",
        ]
        parts += [f"        if (limit > {j}) {{ log({j}); }}" for j in range(40)]
        parts += ["        return List.of();", "    }"]
    parts += ["}"]
    return "\n".join(parts) + "\n"


def c_file(functions: int = 60) -> str:
    parts = [
        "#include <stdio.h>",
        "#include <stdlib.h>",
        '#include "buffer.h"',
        "",
        "#define BUFFER_SIZE 4096",
        "",
        "struct buffer {",
        "    char *data;",
        "    size_t len;",
        "};",
        "",
        "typedef struct buffer buffer_t;",
        "",
        "static int buffer_grow(buffer_t *b, size_t extra)",
        "{",
        "    return 0;",
        "}",
        "",
        "int main(int argc, char **argv) {",
        "    return 0;",
        "}",
    ]
    for i in range(functions):
        parts += ["", f"void process_chunk_{i}(buffer_t *b, const char *src, size_t n) {{"]
        parts += [f"    if (n > {j}) {{ b->len += {j}; }}" for j in range(50)]
        parts += ["}"]
    return "\n".join(parts) + "\n"


def ruby_file(methods: int = 80) -> str:
    parts = [
        "require 'json'",
        "require_relative 'lib/client'",
        "",
        "MAX_RETRIES = 5",
        "",
        "module Billing",
        "  class Invoice < ApplicationRecord",
        "    def self.overdue(now = Time.now)",
        "      where('due < ?', now)",
        "    end",
        "",
        "    def total_with_tax(rate)",
        "      total * (1 + rate)",
        "    end",
    ]
    for i in range(methods):
        parts += ["", f"    def step_{i}(input, options = {{}})"]
        parts += [f"      input = transform(input, {j})" for j in range(30)]
        parts += ["      input", "    end"]
    parts += ["  end", "end"]
    return "\n".join(parts) + "\n"


def shell_script(functions: int = 60) -> str:
    parts = [
        "#!/usr/bin/env bash",
        "set -euo pipefail",
        "source ./lib/common.sh",
        "export DEPLOY_ENV=production",
        "readonly RETRIES=3",
        "",
        "function deploy_service {",
        '  echo "deploying $1"',
        "}",
        "",
        "cleanup() {",
        "  rm -rf /tmp/build",
        "}",
    ]
    for i in range(functions):
        parts += ["", f"check_{i}() {{"]
        parts += [f'  run_check "{i}" "{j}" || return 1' for j in range(50)]
        parts += ["}"]
    parts += ["", 'deploy_service "$@"']
    return "\n".join(parts) + "\n"


def sql_schema(inserts: int = 2000) -> str:
    parts = [
        "-- Schema for the shop",
        "CREATE TABLE IF NOT EXISTS customers (",
        "    id BIGSERIAL PRIMARY KEY,",
        "    email TEXT NOT NULL UNIQUE,",
        "    created_at TIMESTAMPTZ DEFAULT now(),",
        "    CONSTRAINT email_lower CHECK (email = lower(email))",
        ");",
        "",
        'CREATE TABLE "order_items" (',
        "    order_id BIGINT REFERENCES orders(id),",
        "    sku VARCHAR(32),",
        "    quantity INTEGER CHECK (quantity > 0),",
        "    price NUMERIC(10, 2),",
        "    PRIMARY KEY (order_id, sku)",
        ");",
        "",
        "CREATE TABLE orders (",
        "    id BIGSERIAL PRIMARY KEY,",
        "    customer_id BIGINT NOT NULL REFERENCES customers(id),",
        "    placed_at TIMESTAMPTZ NOT NULL,",
        "    status TEXT DEFAULT 'new'",
        ");",
        "",
        "CREATE UNIQUE INDEX customers_email_idx ON customers (email);",
        "",
        "CREATE OR REPLACE VIEW customer_totals AS",
        "SELECT c.id AS customer_id, c.email, sum(i.price * i.quantity) AS total",
        "FROM customers c JOIN order_items i ON i.order_id = c.id GROUP BY c.id;",
        "",
        "CREATE FUNCTION order_total(p_order BIGINT, p_tax NUMERIC DEFAULT 0) RETURNS NUMERIC AS $$",
        "  SELECT sum(price * quantity) * (1 + p_tax) FROM order_items WHERE order_id = p_order;",
        "$$ LANGUAGE sql;",
        "",
    ]
    for i in range(inserts):
        parts.append(f"INSERT INTO customers (id, email) VALUES ({i}, 'customer{i}@example.com');")
    return "\n".join(parts) + "\n"


def markdown_document(sections: int = 12) -> str:
    parts = ["# Lossless Context Management", "", "A paper about keeping every message.", ""]
    for i in range(sections):
        parts += [f"## {i + 1}. Section about topic {i}", ""]
        for j in range(40):
            parts.append(
                f"Paragraph {j} of section {i} explains compaction, summaries and the DAG "
                "in careful detail, with numbers like 25,000 tokens and dates like 2026-02-17."
            )
        parts.append("")
    parts += ["References", "==========", "", "Ehrlich & Blackman, 2026.", "THE END"]
    return "\n".join(parts) + "\n"


def server_log(lines: int = 6000) -> str:
    levels = ["INFO", "INFO", "DEBUG", "WARN", "INFO", "ERROR"]
    out = []
    for i in range(lines):
        level = levels[i % 6] if i % 997 else "FATAL"
        out.append(
            f"2026-02-17T10:{(i // 60) % 60:02d}:{i % 60:02d}Z {level} worker-{i % 4} request {i} done"
        )
    return "\n".join(out) + "\n"


# ── Helpers ──────────────────────────────────────────────────────────────────


def _lines(summary: str) -> list[str]:
    return summary.splitlines()


def _within_budget(summary: str) -> bool:
    return 200 <= estimate_tokens(summary) <= 500


# ── JSON ─────────────────────────────────────────────────────────────────────


def test_a_json_array_of_records_names_its_keys_types_and_lengths():
    content = json_records()
    assert 29_000 <= estimate_tokens(content) <= 31_000
    result = explore(content, name="users.json", mime=None)
    assert (result.kind, result.mime_type, result.extension) == (
        "json",
        "application/json",
        ".json",
    )
    lines = _lines(result.summary)
    assert lines[0] == "JSON: top-level array of 450 items; nesting depth 3."
    assert "$ array (length 450) of object" in lines
    assert (
        "$[*] object ×450: id int, name str, email str, address object, tags array, active bool, "
        "balance float, referrer?(10%) null"
    ) in lines
    assert "$[*].address object ×450: street str, city str, zip str" in lines
    assert "$[*].tags array ×450 (length 0-3) of str" in lines
    assert "$[*].id: int; 1 to 450; 100+ distinct; e.g. 1, 2, 3" in lines
    assert '$[*].address.city: str; 5 distinct; e.g. "Oslo", "Lima", "Pune"' in lines
    assert _within_budget(result.summary)


def test_a_long_json_array_is_sampled_and_says_so():
    result = explore(json_records(3000), name="users.json", mime=None)
    lines = _lines(result.summary)
    assert lines[0] == "JSON: top-level array of 3,000 items; nesting depth 3."
    assert lines[1].startswith("Counts (×N) are of the ")
    assert "$ array (length 3,000) of object" in lines
    assert any(line.startswith("$[*] object ×1,000: id int, name str") for line in lines)
    assert _within_budget(result.summary)


def test_a_json_object_reports_nesting_maps_and_nested_arrays():
    result = explore(json_config(), name=None, mime=None)
    lines = _lines(result.summary)
    assert result.kind == "json"
    assert lines[0] == "JSON: top-level object with 5 keys; nesting depth 4."
    assert (
        "$ object: version str, generated_at str, settings object, users_by_id object, matrix array"
    ) in lines
    assert "$.settings object: retries int, timeout_seconds float, features object" in lines
    assert any(
        line.startswith("$.users_by_id map of object, up to 400 keys (u0000, u0001, u0002")
        for line in lines
    )
    assert "$.users_by_id.* object ×400: name str, roles array" in lines
    assert "$.matrix[*][*] array ×1,000 (length 2) of int" in lines
    assert '$.version: str; 1 distinct; e.g. "2.4.1"' in lines
    assert _within_budget(result.summary)


def test_json_lines_are_summarised_as_records():
    content = "\n".join(json.dumps({"event": f"e{i}", "n": i}) for i in range(2000)) + "\n"
    result = explore(content, name="events.jsonl", mime=None)
    lines = _lines(result.summary)
    assert (result.kind, result.extension) == ("json", ".jsonl")
    assert lines[0] == "JSON Lines: 2,000 records; nesting depth 2."
    assert "$[*] object ×1,000: event str, n int" in lines


def test_invalid_json_falls_back_to_text_with_a_note():
    content = '[{"a": 1}, {"a": 2} {"a": 3}]\n' + "filler line\n" * 3000
    result = explore(content, name="broken.json", mime=None)
    lines = _lines(result.summary)
    assert result.kind == "json"
    assert lines[0] == (
        "Note: could not read as JSON: Expecting ',' delimiter at line 1 column 21; "
        "summarised as text."
    )
    assert lines[1] == "Text: 3,001 lines, 6,006 words, 36,030 characters."
    assert "Beginning:" in lines
    assert estimate_tokens(result.summary) <= 500


def test_json_nested_too_deeply_to_parse_falls_back_to_text():
    content = "[" * 200_000 + "]" * 200_000
    result = explore(content, name="deep.json", mime=None)
    assert result.summary.startswith(
        "Note: could not read as JSON: nested too deeply to parse; summarised as text."
    )
    assert estimate_tokens(result.summary) <= 500


def test_a_single_json_scalar_is_shown_clipped():
    result = explore(json.dumps("x" * 100_000), name="s.json", mime=None)
    assert result.summary.startswith('JSON: a single str value: "xxxx')
    assert estimate_tokens(result.summary) <= 500


# ── CSV and TSV ──────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("delimiter", "label", "name"), [(",", "CSV", "o.csv"), ("\t", "TSV", "o.tsv")]
)
def test_a_table_names_columns_types_rows_and_samples(delimiter, label, name):
    result = explore(csv_orders(delimiter=delimiter), name=name, mime=None)
    lines = _lines(result.summary)
    shown = "tab" if delimiter == "\t" else "','"
    assert lines[0] == (
        f"{label}: 5,000 data rows × 7 columns (first row taken as the header; delimiter {shown})."
    )
    assert lines[1:9] == [
        "Columns:",
        "order_id (int; 100,000 to 104,999; 1,000+ distinct; e.g. 100000, 100001, 100002)",
        'customer (text; 97 distinct; e.g. "Customer 0, Ltd", "Customer 1, Ltd", "Customer 2, Ltd")',
        'order_date (date; 2025-01-01 to 2025-12-28; 84 distinct; e.g. "2025-01-01", '
        '"2025-02-02", "2025-03-03")',
        "amount (float; 0 to 498.83; 1,000+ distinct; e.g. 0.00, 7.31, 14.62)",
        'currency (text; 3 distinct; e.g. "EUR", "USD", "NOK")',
        "shipped (bool; 2 distinct; e.g. true, false)",
        'notes (text; 1 distinct; 4,285 empty; e.g. "gift wrap")',
    ]
    assert (
        lines[9] == "Row 1: 100000 | Customer 0, Ltd | 2025-01-01 | 0.00 | EUR | true | gift wrap"
    )
    assert (
        lines[-1]
        == "Row 5,000 (last): 104999 | Customer 52, Ltd | 2025-08-16 | 42.69 | USD | false |"
    )
    assert _within_budget(result.summary)


def test_ragged_rows_are_counted():
    content = "a,b,c\n1,2,3\n4,5\n6,7,8,9\n10,11,12\n"
    lines = _lines(explore(content, name="r.csv", mime=None).summary)
    assert lines[1] == "Rows with a different number of fields than the header: 2."


def test_a_very_wide_table_lists_every_column_name_it_can_and_stays_in_budget():
    header = ",".join(f"metric_{i}" for i in range(2000))
    rows = "\n".join(",".join(str(i * j) for j in range(2000)) for i in range(50))
    result = explore(header + "\n" + rows + "\n", name="wide.csv", mime=None)
    lines = _lines(result.summary)
    assert lines[0].startswith("CSV: 50 data rows × 2,000 columns")
    assert lines[1].startswith("Column names (2,000): metric_0, metric_1, metric_2, metric_3,")
    assert lines[1].endswith(" more)")
    assert lines[2:5] == [
        "Columns:",
        "metric_0 (int; 1 distinct; e.g. 0)",
        "metric_1 (int; 0 to 49; 50 distinct; e.g. 0, 1, 2)",
    ]
    assert any(line.endswith(" more columns not described") for line in lines)
    assert _within_budget(result.summary)


# ── YAML ─────────────────────────────────────────────────────────────────────


def test_yaml_names_top_level_keys_and_structure():
    result = explore(yaml_compose(), name="docker-compose.yml", mime=None)
    lines = _lines(result.summary)
    assert (result.kind, result.mime_type, result.extension) == ("yaml", "application/yaml", ".yml")
    assert lines[0] == "YAML: one document, a mapping with 5 top-level keys; nesting depth 4."
    assert lines[1] == "Top-level keys: version, x-defaults, services, volumes, networks"
    assert any(
        line.startswith("$.services map of object, up to 300 keys (svc0, svc1, svc2")
        for line in lines
    )
    assert (
        "$.services.* object ×300: restart str, image str, ports array, environment object" in lines
    )
    assert "$.services.*.environment object ×300: LOG_LEVEL str, WORKERS int" in lines
    assert "$.services.*.environment.WORKERS: int; 1 to 8; 8 distinct; e.g. 1, 2, 3" in lines
    assert _within_budget(result.summary)


def test_several_yaml_documents_are_counted():
    content = "---\nkind: Service\nname: a\n---\nkind: Deployment\nname: b\nreplicas: 3\n"
    lines = _lines(explore(content, name="k8s.yaml", mime=None).summary)
    assert lines[0] == "YAML: 2 documents ($[*] is one document); nesting depth 2."
    assert "$[*] object ×2: kind str, name str, replicas?(50%) int" in lines


def test_invalid_yaml_gets_a_line_outline():
    content = "server:\n  host: a\n  port: 80\n  bad: [unclosed\nclients:\n  web: 1\n  cli: 2\n"
    lines = _lines(explore(content, name="c.yaml", mime=None).summary)
    assert lines[0].startswith("YAML (did not parse at line ")
    assert lines[0].endswith("; outline read from the lines).")
    assert lines[1:] == [
        "Top-level keys (2):",
        "server (3 keys): host, port, bad",
        "clients (2 keys): web, cli",
    ]


def test_yaml_python_tags_are_not_executed():
    content = "a: !!python/object/apply:os.system ['touch /tmp/lcm-yaml-pwned']\nb: 1\nc: 2\n"
    result = explore(content, name="evil.yaml", mime=None)
    assert result.summary.startswith("YAML (did not parse at line 1; outline read from the lines).")
    assert "Top-level keys (3):" in result.summary


def test_a_yaml_alias_bomb_is_scanned_within_bounds():
    lines = ["a: &a [" + ", ".join(["lol"] * 10) + "]"]
    for i in range(1, 10):
        previous = "a" if i == 1 else f"b{i - 1}"
        lines.append(f"b{i}: &b{i} [" + ", ".join([f"*{previous}"] * 10) + "]")
    started = time.perf_counter()
    result = explore("\n".join(lines) + "\n", name="bomb.yaml", mime=None)
    assert time.perf_counter() - started < 30  # runaway guard: an expanded bomb never ends
    assert result.summary.splitlines()[0].startswith(
        "YAML: one document, a mapping with 10 top-level keys; nesting depth "
    )
    assert "Counts (×N) are of the 50,000 values scanned" in result.summary
    assert estimate_tokens(result.summary) <= 500


# ── XML ──────────────────────────────────────────────────────────────────────


def test_xml_names_root_children_counts_and_attributes():
    result = explore(xml_catalog(), name="catalog.xml", mime=None)
    lines = _lines(result.summary)
    assert (result.kind, result.mime_type, result.extension) == ("xml", "application/xml", ".xml")
    assert lines[0] == (
        "XML: root <catalog> (attributes: version); 12,501 elements, 6 distinct names, depth 3."
    )
    assert lines[1] == "Namespaces: urn:dc"
    assert '/catalog ×1; @version "3"; children book ×2,500' in lines
    assert (
        '/catalog/book ×2,500; @id "b0"/"b1"/"b2", @lang "en"/"no"/"fr"; children title ×2,500, '
        "author ×2,500, price ×2,500, subject ×2,500"
    ) in lines
    assert '/catalog/book/price ×2,500; @currency "EUR"; text "10.99", "11.99", "12.99"' in lines
    assert any(line.startswith('First <book>: <book xmlns:ns0="urn:dc" id="b0"') for line in lines)
    assert _within_budget(result.summary)


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<lolz>&lol9;</lolz>
"""


def test_a_billion_laughs_document_is_refused_not_expanded():
    started = time.perf_counter()
    result = explore(BILLION_LAUGHS, name="lolz.xml", mime=None)
    assert time.perf_counter() - started < 30  # runaway guard: expansion would never end
    assert result.kind == "xml"
    assert result.summary.splitlines()[0] == (
        "Note: could not read as XML: refused as unsafe XML (EntitiesForbidden); "
        "nothing was expanded; summarised as text."
    )
    assert "lollollol" not in result.summary
    assert len(result.summary) < 2 * len(BILLION_LAUGHS)


def test_an_external_entity_is_not_resolved(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-MARKER")
    content = (
        '<?xml version="1.0"?>\n'
        f'<!DOCTYPE r [<!ENTITY xxe SYSTEM "file://{secret}">]>\n'
        "<r><v>&xxe;</v></r>\n"
    )
    result = explore(content, name="xxe.xml", mime=None)
    assert "TOP-SECRET-MARKER" not in result.summary
    assert result.summary.startswith("Note: could not read as XML: refused as unsafe XML")


def test_an_external_dtd_is_not_fetched(tmp_path):
    dtd = tmp_path / "evil.dtd"
    dtd.write_text('<!ENTITY leak "TOP-SECRET-MARKER">')
    content = f'<?xml version="1.0"?>\n<!DOCTYPE r SYSTEM "file://{dtd}">\n<r><v>x</v></r>\n'
    result = explore(content, name="dtd.xml", mime=None)
    assert "TOP-SECRET-MARKER" not in result.summary
    assert result.summary.splitlines()[0] == (
        "XML: root <r> (attributes: none); 2 elements, 2 distinct names, depth 2."
    )


def test_malformed_xml_falls_back_to_text_with_a_note():
    result = explore("<a><b></a>", name="bad.xml", mime=None)
    assert result.summary.splitlines()[0] == (
        "Note: could not read as XML: not well-formed XML (mismatched tag: line 1, column 8); "
        "summarised as text."
    )


# ── Code ─────────────────────────────────────────────────────────────────────


def test_a_python_module_lists_imports_and_signatures():
    result = explore(python_module(), name="billing.py", mime=None)
    lines = _lines(result.summary)
    assert (result.kind, result.mime_type, result.extension) == (
        "code:python",
        "text/x-python",
        ".py",
    )
    assert lines[:7] == [
        "Python source: 2,676 lines (2,583 non-blank), 46 definitions.",
        "Docstring: Billing engine: invoices, payments and the ledger.",
        "Runs as a script (if __name__ == '__main__').",
        "Imports (6): __future__ (annotations), dataclasses, logging, decimal (Decimal), "
        "typing (Any, Iterable), .models (Invoice, Payment)",
        "Other names (2): LOG, DEFAULT_CURRENCY",
        "Definitions (line: signature):",
        "L17: @dataclasses.dataclass(frozen=True) class Money",
    ]
    assert lines[7:12] == [
        "  L18: attributes: amount, currency",
        "  L21: def add(self, other: Money) -> Money",
        "L25: class Ledger(Iterable[Payment])",
        "  L28: def __init__(self, payments: list[Payment] | None=None) -> None",
        "  L31: async def settle(self, invoice: Invoice, *, partial: bool=False) -> Money",
    ]
    assert (
        "L35: def compute_total_0(items: list[dict[str, Any]], rate: float=0.0) -> Decimal" in lines
    )
    assert lines[-1].startswith("… 29 more not shown: compute_total_11, compute_total_12")
    assert _within_budget(result.summary)


def test_python_that_does_not_parse_is_outlined_from_its_lines():
    content = python_module().replace("    total = Decimal(0)", "    total = = Decimal(0)", 1)
    lines = _lines(explore(content, name="billing.py", mime=None).summary)
    assert lines[1] == "Note: does not parse as Python; outline read from the lines."
    assert "L17: class Money" in lines
    assert "  L21: def add(self, other: Money) -> Money" in lines
    assert "L25: class Ledger(Iterable[Payment])" in lines
    assert (
        "L35: def compute_total_0(items: list[dict[str, Any]], rate: float = 0.0) -> Decimal"
        in lines
    )


def test_a_go_file_lists_package_imports_types_and_funcs():
    result = explore(go_file(), name="store.go", mime=None)
    lines = _lines(result.summary)
    assert result.kind == "code:go"
    assert lines[:9] == [
        "Go source: 2,667 lines (2,601 non-blank), 64 definitions.",
        "package store",
        "Imports (3): context, database/sql, github.com/sirupsen/logrus",
        "Other names (1): MaxOrders",
        "Definitions (line: signature):",
        "L12: type Order struct",
        "L17: type Store interface",
        "L21: func NewStore(db *sql.DB) *SQLStore",
        "L25: func (s *SQLStore) Get(ctx context.Context, id int64) (*Order, error)",
    ]
    assert "L29: func handler0(ctx context.Context, w Writer, r *Request) error" in lines
    assert lines[-1].startswith("… ") and "more not shown: handler" in lines[-1]
    assert _within_budget(result.summary)


def test_a_typescript_file_lists_imports_interfaces_classes_and_functions():
    result = explore(typescript_file(), name="user.service.ts", mime=None)
    lines = _lines(result.summary)
    assert result.kind == "code:typescript"
    assert lines[:9] == [
        "TypeScript source: 2,673 lines (2,618 non-blank), 55 definitions.",
        "Imports (4): @angular/core, ./models, rxjs/operators, fs",
        "Definitions (line: signature):",
        "L9: export interface Session",
        "L13: export type Role = 'admin' | 'user';",
        "L15: export class UserService",
        "  L18: async getUser(id: string): Promise<User>",
        "L23: export const toName = (user: User): string => user.name;",
        "L25: export async function load0(id: string, retries = 3): Promise<void>",
    ]
    assert _within_budget(result.summary)


def test_a_rust_file_lists_uses_items_and_impl_members():
    result = explore(rust_file(), name="lib.rs", mime=None)
    lines = _lines(result.summary)
    assert lines[:11] == [
        "Rust source: 2,721 lines (2,666 non-blank), 56 definitions.",
        "Imports (2): std::collections::HashMap, serde::{Deserialize, Serialize}",
        "Other names (1): LIMIT",
        "Definitions (line: signature):",
        "L7: pub struct Account",
        "L11: pub enum Event { Opened, Closed }",
        "L13: pub trait Repository",
        "  L14: fn find(&self, id: u64) -> Option<Account>;",
        "L17: impl Repository for MemoryRepo",
        "  L18: fn find(&self, id: u64) -> Option<Account>",
        "L23: pub async fn process_0(map: &mut HashMap<u64, Account>) -> Result<(), Error>",
    ]
    assert _within_budget(result.summary)


def test_a_java_file_lists_package_imports_class_and_methods():
    result = explore(java_file(), name="InvoiceService.java", mime=None)
    lines = _lines(result.summary)
    assert lines[:7] == [
        "Java source: 2,653 lines (2,590 non-blank), 62 definitions.",
        "package com.example.billing;",
        "Imports (3): java.util.List, java.util.Map, java.util.Objects.requireNonNull",
        "Definitions (line: signature):",
        "L7: public class InvoiceService extends BaseService implements Closeable",
        "  L10: public InvoiceService(Map<String, Invoice> cache)",
        "  L14: public List<Invoice> findByCustomer0(String customerId, int limit)",
    ]
    assert _within_budget(result.summary)


def test_a_c_file_lists_includes_macros_types_and_functions():
    result = explore(c_file(), name="buffer.c", mime=None)
    lines = _lines(result.summary)
    assert lines[:9] == [
        "C source: 3,201 lines (3,136 non-blank), 64 definitions.",
        'Imports (3): <stdio.h>, <stdlib.h>, "buffer.h"',
        "Other names (1): BUFFER_SIZE",
        "Definitions (line: signature):",
        "L7: struct buffer",
        "L12: typedef struct buffer buffer_t;",
        "L14: static int buffer_grow(buffer_t *b, size_t extra)",
        "L19: int main(int argc, char **argv)",
        "L23: void process_chunk_0(buffer_t *b, const char *src, size_t n)",
    ]
    assert _within_budget(result.summary)


def test_a_ruby_file_lists_requires_modules_classes_and_methods():
    result = explore(ruby_file(), name="invoice.rb", mime=None)
    lines = _lines(result.summary)
    assert lines[:9] == [
        "Ruby source: 2,736 lines (2,653 non-blank), 84 definitions.",
        "Imports (2): json, lib/client",
        "Other names (1): MAX_RETRIES",
        "Definitions (line: signature):",
        "L6: module Billing",
        "  L7: class Invoice < ApplicationRecord",
        "    L8: def self.overdue(now = Time.now)",
        "    L12: def total_with_tax(rate)",
        "    L16: def step_0(input, options = {})",
    ]
    assert _within_budget(result.summary)


def test_a_shell_script_lists_sources_variables_and_functions():
    result = explore(shell_script(), name="deploy.sh", mime=None)
    lines = _lines(result.summary)
    assert lines[:7] == [
        "Shell source: 3,195 lines (3,132 non-blank), 62 definitions.",
        "Imports (1): ./lib/common.sh",
        "Other names (2): DEPLOY_ENV, RETRIES",
        "Definitions (line: signature):",
        "L7: function deploy_service",
        "L11: cleanup()",
        "L15: check_0()",
    ]
    assert _within_budget(result.summary)


def test_sql_lists_tables_with_columns_views_functions_and_statement_counts():
    result = explore(sql_schema(), name="schema.sql", mime=None)
    lines = _lines(result.summary)
    assert result.kind == "code:sql"
    assert lines[:4] == [
        "SQL source: 2,033 lines (2,027 non-blank), 6 definitions.",
        "INSERT INTO customers (id, email): 2,000 statements",
        "Example statement: INSERT INTO customers (id, email) VALUES (0, 'customer0@example.com');",
        "Definitions (line: signature):",
    ]
    assert lines[4:] == [
        "L2: CREATE TABLE customers (id BIGSERIAL PRIMARY KEY, email TEXT NOT NULL UNIQUE, "
        "created_at TIMESTAMPTZ DEFAULT now(), CONSTRAINT email_lower CHECK (email = lower(email)))",
        "L9: CREATE TABLE order_items (order_id BIGINT REFERENCES orders(id), sku VARCHAR(32), "
        "quantity INTEGER CHECK (quantity > 0), price NUMERIC(10, 2), PRIMARY KEY (order_id, sku))",
        "L17: CREATE TABLE orders (id BIGSERIAL PRIMARY KEY, customer_id BIGINT NOT NULL "
        "REFERENCES customers(id), placed_at TIMESTAMPTZ NOT NULL, status TEXT DEFAULT 'new')",
        "L24: CREATE INDEX customers_email_idx ON customers (email)",
        "L26: CREATE VIEW customer_totals (columns: customer_id, email, total)",
        "L30: CREATE FUNCTION order_total(p_order BIGINT, p_tax NUMERIC DEFAULT 0) RETURNS NUMERIC",
    ]
    assert _within_budget(result.summary)


def test_code_with_little_structure_is_topped_up_with_an_excerpt():
    content = "var a=1;" * 50_000  # minified: one line, nothing to outline
    result = explore(content, name="bundle.min.js", mime=None)
    lines = _lines(result.summary)
    assert lines[0] == "JavaScript source: 1 line (1 non-blank), 0 definitions."
    assert lines[1] == "Excerpt (beginning):"
    assert lines[2].startswith("var a=1;var a=1;")
    assert _within_budget(result.summary)


def test_many_long_definitions_never_exceed_the_budget():
    content = "\n".join(
        f"def function_with_a_very_long_name_{i}({', '.join(f'argument_{j}: int' for j in range(12))}):"
        "\n    pass\n"
        for i in range(3000)
    )
    result = explore(content, name="long.py", mime=None)
    assert result.summary.splitlines()[-1].startswith("… ")
    assert estimate_tokens(result.summary) <= 500


# ── Text ─────────────────────────────────────────────────────────────────────


def test_a_markdown_document_lists_headings_counts_beginning_and_end():
    result = explore(markdown_document(), name="paper.md", mime="text/markdown")
    lines = _lines(result.summary)
    assert (result.kind, result.mime_type, result.extension) == ("text", "text/markdown", ".md")
    assert lines[:5] == [
        "Text: 525 lines, 11,130 words, 71,011 characters.",
        "Headings (15):",
        "L1: # Lossless Context Management",
        "L5: ## 1. Section about topic 0",
        "L48: ## 2. Section about topic 1",
    ]
    assert "L521: References" in lines
    assert "L525: THE END" in lines
    assert lines[lines.index("Beginning:") + 1] == "# Lossless Context Management"
    assert lines[-1] == "THE END"
    assert _within_budget(result.summary)


def test_a_log_reports_levels_and_notable_lines():
    result = explore(server_log(), name="server.log", mime=None)
    lines = _lines(result.summary)
    assert lines[:4] == [
        "Text: 6,000 lines, 36,000 words, 318,895 characters.",
        "Log levels mentioned: INFO 2,996, DEBUG 999, WARN 999, ERROR 999, FATAL 7",
        "Notable lines:",
        "L1: 2026-02-17T10:00:00Z FATAL worker-0 request 0 done",
    ]
    assert lines[-1] == "2026-02-17T10:39:59Z ERROR worker-3 request 5999 done"
    assert _within_budget(result.summary)


def test_a_pdf_text_is_summarised_as_text_whatever_it_looks_like():
    content = '{"not": "json"}\n' + "Extracted page text.\n" * 2000
    result = explore(content, name="paper.pdf", mime="application/pdf")
    assert (result.kind, result.mime_type, result.extension) == ("text", "application/pdf", ".txt")
    assert result.summary.startswith("Text: 2,001 lines, 6,002 words")


def test_a_small_text_is_shown_whole():
    result = explore("hello world\n", name=None, mime=None)
    assert result.summary == "Text: 1 line, 2 words, 12 characters.\nContent:\nhello world"


def test_cjk_and_emoji_text_stays_within_budget():
    content = "日本語のテキストです。" * 20_000 + "\n" + "🙂🎉" * 20_000
    result = explore(content, name="notes.txt", mime=None)
    assert 200 <= estimate_tokens(result.summary) <= 500


def test_a_ten_megabyte_text_is_explored_within_its_read_caps():
    content = "a line of plain log text with ERROR now and then\n" * 200_000
    started = time.perf_counter()
    result = explore(content, name="big.log", mime=None)
    assert time.perf_counter() - started < 60  # runaway guard, not a speed target
    assert result.line_count == 200_000
    assert estimate_tokens(result.summary) <= 500


# ── Pluggable text summarizer ────────────────────────────────────────────────


def test_a_text_summarizer_is_used_for_text_files():
    calls = []

    def summarize(text: str, max_tokens: int) -> str:
        calls.append((len(text), max_tokens))
        return "A paper about lossless context management."

    content = markdown_document()
    result = explore(content, name="paper.md", mime=None, summarize_text=summarize)
    assert result.summary == (
        "Text: 525 lines, 11,130 words, 71,011 characters.\n"
        "A paper about lossless context management."
    )
    assert len(calls) == 1
    assert calls[0][0] == len(content)
    assert 400 <= calls[0][1] < 500


def test_a_failing_summarizer_falls_back_to_the_deterministic_summary():
    def broken(text: str, max_tokens: int) -> str:
        raise RuntimeError("model unavailable")

    content = markdown_document()
    expected = explore(content, name="paper.md", mime=None).summary
    assert explore(content, name="paper.md", mime=None, summarize_text=broken).summary == expected
    assert explore(
        content, name="paper.md", mime=None, summarize_text=lambda t, n: "  "
    ).summary == (expected)
    assert explore(
        content, name="paper.md", mime=None, summarize_text=lambda t, n: None
    ).summary == (expected)


def test_a_long_winded_summarizer_is_cut_to_the_budget():
    result = explore(
        markdown_document(), name="paper.md", mime=None, summarize_text=lambda t, n: "word " * 5000
    )
    assert estimate_tokens(result.summary) <= 500
    assert result.summary.endswith("…")


def test_the_summarizer_is_not_used_for_structured_files():
    def never(text: str, max_tokens: int) -> str:
        raise AssertionError("called for a structured file")

    assert explore(json_records(), name="u.json", mime=None, summarize_text=never).kind == "json"
    assert explore(go_file(), name="s.go", mime=None, summarize_text=never).kind == "code:go"


# ── Every sample: budget, determinism, counts ────────────────────────────────

SAMPLES = {
    "users.json": json_records,
    "config.json": json_config,
    "orders.csv": csv_orders,
    "compose.yaml": yaml_compose,
    "catalog.xml": xml_catalog,
    "billing.py": python_module,
    "store.go": go_file,
    "user.service.ts": typescript_file,
    "lib.rs": rust_file,
    "InvoiceService.java": java_file,
    "buffer.c": c_file,
    "invoice.rb": ruby_file,
    "deploy.sh": shell_script,
    "schema.sql": sql_schema,
    "paper.md": markdown_document,
    "server.log": server_log,
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_sample_is_summarised_within_budget_and_deterministically(name):
    content = SAMPLES[name]()
    first = explore(content, name=name, mime=None)
    second = explore(content, name=name, mime=None)
    assert first == second
    assert _within_budget(first.summary)
    assert first.byte_size == len(content.encode("utf-8"))
    assert first.line_count == content.count("\n") + (0 if content.endswith("\n") else 1)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_the_content_alone_gives_the_same_kind_as_the_name(name):
    content = SAMPLES[name]()
    assert (
        explore(content, name=None, mime=None).kind == explore(content, name=name, mime=None).kind
    )


@pytest.mark.parametrize(
    "content",
    [
        json.dumps({f"key_{i}": {f"field_{j}": j for j in range(30)} for i in range(40)}),
        json.dumps([{f"k{i}_{j}": j for j in range(60)} for i in range(100)]),
        "<r>" + "".join(f"<e{i} a{i}='1'><c{i}>t</c{i}></e{i}>" for i in range(3000)) + "</r>",
        "\n".join(f"top_{i}:\n  child: {i}" for i in range(3000)),
        "\n".join(f"def f{i}(x):\n    return x" for i in range(5000)),
        "# H\n" * 5000,
        "x" * 1_000_000,
        "",
    ],
    ids=[
        "json-wide",
        "json-many-keys",
        "xml-many-paths",
        "yaml-many-keys",
        "many-defs",
        "headings",
        "one-line",
        "empty",
    ],
)
def test_adversarial_shapes_never_exceed_the_budget(content):
    assert estimate_tokens(explore(content, name=None, mime=None).summary) <= 500


def test_byte_size_counts_utf8_bytes_and_line_count_counts_a_last_partial_line():
    result = explore("héllo 🙂\nsecond", name="a.txt", mime=None)
    assert result.byte_size == 1 + 2 + 3 + 1 + 4 + 1 + 6
    assert result.line_count == 2
    assert [count_lines(t) for t in ("", "a", "a\n", "a\nb", "\n\n")] == [0, 1, 1, 2, 2]

#!/usr/bin/env python3
"""Run the real Codex and OpenCode CLIs against a local Responses API upstream that answers
like a model driving them (tests/support/agent_upstream.py), and record every request they
send. Not part of the default test run: it needs the CLIs (`scripts/agent-clis install codex
opencode`); the default suite reads the small sanitized recordings this script keeps under
tests/dropin/data/responses_clis/.

    scripts/responses_clis.py record [--out DIR] [--keep]
        the CLIs straight at the scripted upstream; every request saved as JSON in DIR
        (default: a temp dir); with --keep, the sanitized set is written to the tests' data.
    scripts/responses_clis.py through [--port 8111] [--context-limit N] [--out DIR]
        the CLIs through the served app (`lcm_serve` on PORT, set up by `lcm_connect
        --proxy`), the scripted upstream behind it; prints what each scenario showed and
        exits non-zero on a failure; with --out, what the upstream received is saved.

Each scenario runs in its own CODEX_HOME / HOME and working directory: a one-shot, a
multi-turn run with shell commands and a patch, a resume, and a run whose small auto-compact
limit makes Codex ask for a compaction (Codex); a run, a shell command plus a file write, and
a continued session (OpenCode).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import agent_upstream  # noqa: E402
from tests.support.fake_responses_api import FakeResponsesAPI  # noqa: E402

KEPT = ROOT / "tests" / "dropin" / "data" / "responses_clis"
# gpt-5.5: the model for which Codex 0.171 declares apply_patch as a freeform tool.
MODEL = "gpt-5.5"
KEY_ENV = "LCM_CLI_UPSTREAM_KEY"


def _cli(name: str) -> str:
    return subprocess.check_output(
        [str(ROOT / "scripts" / "agent-clis"), "path", name], text=True
    ).strip()


def _codex_config(home: Path, base_url: str, extra: str = "", headers: str = "") -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'model = "{MODEL}"\n'
        'model_provider = "rec"\n'
        f"{extra}\n"
        "[model_providers.rec]\n"
        'name = "rec"\n'
        f'base_url = "{base_url}"\n'
        'wire_api = "responses"\n'
        f'env_key = "{KEY_ENV}"\n'
        f"{headers}\n"
    )


def _run(
    argv: list[str], *, env: dict, cwd: Path, timeout: float = 180
) -> subprocess.CompletedProcess:
    started = time.monotonic()
    done = subprocess.run(
        argv,
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    print(f"  $ {' '.join(argv[1:4])}… rc={done.returncode} in {time.monotonic() - started:.1f}s")
    if done.returncode != 0:
        print("  stderr:", done.stderr[-2000:])
    return done


def codex_scenarios(base_url: str, work: Path, env_extra: dict, configure=None) -> dict:
    """name -> exit code. `configure(codex_home, extra_toml)` writes the config (default:
    a provider straight at `base_url`)."""
    configure = configure or (lambda home, extra="": _codex_config(home, base_url, extra=extra))
    codex = _cli("codex")
    results = {}
    home = work / "codex-home"
    cwd = work / "codex-work"
    cwd.mkdir(parents=True, exist_ok=True)
    configure(home)
    env = {**os.environ, "CODEX_HOME": str(home), KEY_ENV: "sk-upstream-test", **env_extra}
    base = [codex, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
    results["codex one-shot"] = _run([*base, "say hello"], env=env, cwd=cwd).returncode
    prompt = "RUN: echo lcm-marker-one\nRUN: ls -la\nPATCH: lcm_patched_file.txt patched by codex"
    results["codex tools"] = _run([*base, prompt], env=env, cwd=cwd).returncode
    resume = [
        codex,
        "exec",
        "resume",
        "--last",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        "RUN: cat lcm_patched_file.txt",
    ]
    results["codex resume"] = _run(resume, env=env, cwd=cwd).returncode
    # A small auto-compact limit: the second turn's history passes it, Codex compacts.
    small = work / "codex-small"
    configure(small, "model_auto_compact_token_limit = 14000")
    env_small = {**env, "CODEX_HOME": str(small)}
    long_prompt = "\n".join(f"RUN: echo compaction-marker-{i} {'x' * 2000}" for i in range(4))
    results["codex compaction"] = _run([*base, long_prompt], env=env_small, cwd=cwd).returncode
    return results


def opencode_scenarios(
    base_url: str, work: Path, env_extra: dict, headers: dict | None = None
) -> dict:
    opencode = _cli("opencode")
    results = {}
    home = work / "opencode-home"
    cwd = work / "opencode-work"
    cwd.mkdir(parents=True, exist_ok=True)
    options = {"baseURL": base_url, "apiKey": "sk-upstream-test"}
    if headers:
        options["headers"] = headers
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {"openai": {"options": options, "models": {MODEL: {}}}},
        "model": f"openai/{MODEL}",
        "autoupdate": False,
        "share": "disabled",
    }
    (home / ".config" / "opencode").mkdir(parents=True, exist_ok=True)
    (home / ".config" / "opencode" / "opencode.json").write_text(json.dumps(config, indent=1))
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local/state"),
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        **env_extra,
    }
    base = [opencode, "run", "--auto", "-m", f"openai/{MODEL}"]
    results["opencode one-shot"] = _run([*base, "say hello"], env=env, cwd=cwd).returncode
    prompt = "RUN: echo lcm-marker-two\nPATCH: opencode_patched_file.txt patched by opencode"
    results["opencode tools"] = _run([*base, prompt], env=env, cwd=cwd).returncode
    results["opencode continue"] = _run(
        [*base, "--continue", "RUN: cat opencode_patched_file.txt"], env=env, cwd=cwd
    ).returncode
    return results


_SECRETS = re.compile(r"(sk-[A-Za-z0-9_-]+|lcm_[A-Za-z0-9]{20,})")


def sanitized(record: dict, work: Path) -> dict:
    """A recording without keys or this machine's paths."""
    text = json.dumps(record)
    text = text.replace(str(work), "/work").replace(str(Path.home()), "/home/user")
    return json.loads(_SECRETS.sub("sk-redacted", text))


def record(out: Path, keep: bool) -> int:
    work = Path(tempfile.mkdtemp(prefix="lcm-responses-clis-"))
    out.mkdir(parents=True, exist_ok=True)
    with FakeResponsesAPI(respond=agent_upstream.answer) as api:
        results = codex_scenarios(api.base_url, work, {})
        codex_count = len(api.requests)
        results |= opencode_scenarios(api.base_url, work, {})
        requests = api.requests
    for index, request in enumerate(requests):
        who = "codex" if index < codex_count else "opencode"
        (out / f"{index:02d}-{who}.json").write_text(
            json.dumps(sanitized(agent_upstream.dumps(request), work), indent=1)
        )
    print(json.dumps(results, indent=1), f"\n{len(requests)} requests in {out}")
    if keep:
        _keep(out)
    shutil.rmtree(work, ignore_errors=True)
    return 0 if not any(results.values()) else 1


def _kind(record: dict) -> str | None:
    """Which of the kept requests a recording is, or None."""
    body, headers = record["body"], record["headers"]
    types = [item.get("type") for item in body.get("input") or []]
    meta = json.loads(headers.get("x-codex-turn-metadata") or "{}")
    if "x-codex-turn-metadata" in headers:
        if meta.get("request_kind") == "compaction":
            return "codex-compaction"
        if meta.get("history_initialization") == "cold_resume":
            return "codex-resume"
        if "Another language model started" in json.dumps(body.get("input")):
            return "codex-after-compaction"  # its summary prefix before the checkpoint
        if "custom_tool_call_output" in types:
            return "codex-apply-patch-round"
        if "function_call_output" in types:
            return "codex-tool-round"
        return "codex-first"
    if "tools" not in body:
        return "opencode-title"
    return "opencode-tool-round" if "function_call_output" in types else "opencode-first"


def _trimmed(value, limit: int = 400):
    """Long texts (system prompts, tool descriptions) cut short: the shapes stay whole."""
    if isinstance(value, str) and len(value) > limit:
        return value[:limit] + f"...[{len(value) - limit} more characters]"
    if isinstance(value, list):
        return [_trimmed(v, limit) for v in value]
    if isinstance(value, dict):
        return {k: _trimmed(v, limit) for k, v in value.items()}
    return value


def _keep(out: Path) -> None:
    """The small set the default suite reads: one request of each kind (the first seen),
    long texts trimmed."""
    KEPT.mkdir(parents=True, exist_ok=True)
    seen = set()
    for path in sorted(out.glob("*.json")):
        record = json.loads(path.read_text())
        kind = _kind(record)
        if kind is None or kind in seen:
            continue
        seen.add(kind)
        (KEPT / f"{kind}.json").write_text(json.dumps(_trimmed(record), indent=1) + "\n")
    print("kept in", KEPT, sorted(seen))


def _manage(env: dict, *args: str) -> str:
    return subprocess.check_output(
        [sys.executable, str(ROOT / "manage.py"), *args], env=env, cwd=ROOT, text=True
    )


def _wait_up(url: str, seconds: float = 120) -> None:
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except urllib.error.HTTPError:
            return  # answering
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"the served app did not answer at {url}")


DROPIN = "/openai/v1"
STORE_REPORT = """
from conversations.models import Conversation, Message
from dropin.models import Thread
print("conversations", Conversation.objects.count(), "messages", Message.objects.count())
for t in Thread.objects.order_by("pk"):
    print(" thread", t.key, "conversation", t.conversation_id, "messages", t.message_count,
          "parent", t.parent_id, "active", t.active)
"""


def _first_turn_tools(work: Path, env: dict) -> dict:
    """A new `codex exec` whose first turn calls lcm_grep (its MCP entry by lcm_connect)."""
    codex = _cli("codex")
    cwd = work / "codex-work"
    run_env = {**env, "CODEX_HOME": str(work / "codex-home"), KEY_ENV: "sk-upstream-test"}
    prompt = 'TOOL: lcm_grep {"query": "lcm-marker-one"}'
    argv = [codex, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
    return {"codex first turn lcm tools": _run([*argv, prompt], env=run_env, cwd=cwd).returncode}


def _report_tools(requests) -> None:
    """Whether the first turn offered the lcm tools, and what the lcm_grep call returned."""
    for request in requests:
        body = request.body
        text = json.dumps(body.get("input"))
        if "TOOL: lcm_grep" not in text:
            continue
        names = sorted(agent_upstream._tools(body))
        lcm = [n for n in names if "lcm" in n]
        print(f"  lcm tools offered: {lcm or 'none'} (of {len(names)})")
        outputs = [i for i in body["input"] if i.get("type") == "function_call_output"]
        if outputs:
            print("  lcm_grep output:", json.dumps(outputs[-1]["output"])[:300])


def through(port: int, context_limit: int, out: Path | None = None) -> int:
    """The CLIs through the served app (`lcm_serve`), set up by `lcm_connect --proxy`, the
    scripted upstream behind it as the `gpt` model (MODEL is its id, so the CLIs' model name
    finds it); then what the store holds."""
    work = Path(tempfile.mkdtemp(prefix="lcm-responses-through-"))
    url = f"http://127.0.0.1:{port}"
    with FakeResponsesAPI(respond=agent_upstream.answer) as api:
        env = {
            **os.environ,
            "LCM_DATA_DIR": str(work / "data"),
            "OPENAI_API_KEY": "sk-server-held",
            "OPENAI_BASE_URL": api.base_url,
            "LCM_MODEL_GPT_MODEL_ID": MODEL,
            "LCM_MODEL_GPT_CONTEXT_LIMIT": str(context_limit),
        }
        _manage(env, "migrate", "-v0")
        token = _manage(env, "lcm_create_user", "ann").split()[-1]
        server = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "lcm_serve", "--port", str(port), "--no-demo"],
            env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        try:
            _wait_up(url + "/openai/v1/models")

            def configure(home: Path, extra: str = "") -> None:
                """Set up by lcm_connect once; another CODEX_HOME gets a copy (a second
                --proxy for the same user would rotate the first one's token)."""
                first = work / "codex-home" / "config.toml"
                home.mkdir(parents=True, exist_ok=True)
                if first.exists():
                    (home / "config.toml").write_text(f"{extra}\n" + first.read_text())
                    return
                (home / "config.toml").write_text(f'model = "{MODEL}"\n{extra}\n')
                # `codex` on PATH: lcm_connect writes its catalog without tool search.
                path = f"{Path(_cli('codex')).parent}{os.pathsep}{env.get('PATH', '')}"
                connect_env = {**env, "CODEX_HOME": str(home), "PATH": path}
                _manage(
                    connect_env, "lcm_connect", "codex", "--proxy", "--url", url, "--user", "ann"
                )
                _manage(connect_env, "lcm_connect", "codex", "--user", "ann", "--write")

            results = codex_scenarios(url, work, {}, configure=configure)
            results |= _first_turn_tools(work, env)
            results |= opencode_scenarios(url + DROPIN, work, {}, headers={"X-LCM-Token": token})
            print(json.dumps(results, indent=1))
            print(f"{len(api.requests)} upstream requests")
            if out is not None:  # what the upstream received: the CLIs' bytes, passed through
                out.mkdir(parents=True, exist_ok=True)
                for index, request in enumerate(api.requests):
                    (out / f"{index:02d}.json").write_text(
                        json.dumps(sanitized(agent_upstream.dumps(request), work), indent=1)
                    )
            _report_tools(api.requests)
            for needle in (
                "lcm-marker-one", "lcm_patched_file.txt", "compaction-marker-2",
                "lcm-marker-two", "opencode_patched_file.txt",
            ):  # fmt: skip
                found = json.loads(_manage(env, "lcm", "--user", "ann", "grep", needle))
                print(f"grep {needle!r}: {len(found.get('results', []))} matches")
            print(_manage(env, "shell", "-c", STORE_REPORT))
        finally:
            os.killpg(server.pid, 15)
            server.wait(30)
    print("work dir:", work)
    return 0 if not any(results.values()) else 1


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="the CLIs straight at the scripted upstream, recorded")
    rec.add_argument("--out", type=Path, default=None)
    rec.add_argument("--keep", action="store_true", help="write the set kept under tests/")
    run = sub.add_parser("through", help="the CLIs through the served app (lcm_serve)")
    run.add_argument("--port", type=int, default=8111)
    run.add_argument("--context-limit", type=int, default=400_000)
    run.add_argument("--out", type=Path, default=None, help="save what the upstream received")
    args = parser.parse_args()
    if args.command == "through":
        return through(args.port, args.context_limit, args.out)
    if args.command == "record":
        return record(args.out or Path(tempfile.mkdtemp(prefix="lcm-cli-requests-")), args.keep)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())

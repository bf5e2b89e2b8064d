"""`manage.py lcm_hook`: what Claude Code's hooks run (docs/capture.md, "Claude Code hooks").

Claude Code writes the hook's input as one JSON object on stdin (`session_id`,
`transcript_path`, `cwd`, `hook_event_name`, and `source` for SessionStart or `trigger`
for PreCompact) and reads the command's stdout. A hook never stops the agent: whatever
goes wrong is said on stderr and the command exits 0.
"""

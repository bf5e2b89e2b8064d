"""`lcm_watch`: follow the coding agents' session stores as they are written and bring
what is new into this server, or a remote one (docs/capture.md, "Live capture")."""

"""Redaction (docs/security.md, "Redaction"): remove a secret or a message from the
canonical transcript and from everything derived from it, through the lineage, as a
resumable job, and prove it is gone (`verify`).

`jobs` creates and runs a job step by step; each step module rewrites one kind of place;
`verify` scans every place the product stores data; `plan` is the dry run.
"""

"""API tokens, stored as SHA-256 digests: issue, rotate, revoke, authenticate (docs/tokens.md)."""

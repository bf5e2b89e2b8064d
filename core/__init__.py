"""The kernel: what every app uses and that uses no app (docs/architecture.md)."""

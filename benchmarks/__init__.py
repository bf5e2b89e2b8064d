"""Measurement code: `manage.py lcm_bench`, one module per subsystem, the load and
scale-out drivers and the data generators. Not product code: no product package imports
it (docs/architecture.md)."""

from django.apps import AppConfig


class BenchmarksConfig(AppConfig):
    """Measurement code (`manage.py lcm_bench`, load and scale-out drivers, data generators):
    not product code. It may import every app; no app imports it (docs/architecture.md)."""

    name = "benchmarks"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Benchmarks"

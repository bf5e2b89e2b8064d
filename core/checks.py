"""System checks: settings that can only be verified by importing something."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, register
from django.utils.module_loading import import_string

from core.token_estimate import MOVED_ESTIMATORS


@register()
def token_estimator_importable(app_configs, **kwargs):
    path = settings.LCM_TOKEN_ESTIMATOR
    try:
        estimator = import_string(MOVED_ESTIMATORS.get(path, path))
    except ImportError as exc:
        return [Error(f"LCM_TOKEN_ESTIMATOR={path!r} cannot be imported: {exc}", id="lcm.E001")]
    if not callable(estimator):
        return [
            Error(f"LCM_TOKEN_ESTIMATOR={path!r} is not a function (str -> int)", id="lcm.E002")
        ]
    return []

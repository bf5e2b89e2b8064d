from django.core.exceptions import ImproperlyConfigured
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt

from core.api.errors import error_body


@csrf_exempt  # a POST to an unknown path is a 404 in the error shape, not a CSRF page
def api_not_found(request, unknown: str) -> JsonResponse:
    """Unknown paths under /api/v1/ answer in the one error shape, not Django's HTML page."""
    return JsonResponse(
        error_body("not_found", f"no API endpoint at /api/v1/{unknown}"), status=404
    )


def add_view_method(view: type, name: str, method) -> None:
    """Give an API view of a lower app an HTTP method that a higher app implements (the
    security app's hard delete on the conversation and session detail endpoints), from that
    app's `AppConfig.ready()`: the lower app does not import the higher one. `method` is
    a function `(view, request, **url_kwargs)`, schema annotations included."""
    if name in vars(view):
        raise ImproperlyConfigured(f"{view.__name__} already has a {name} method")
    setattr(view, name, method)

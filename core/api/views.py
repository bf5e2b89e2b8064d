from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt

from core.api.errors import error_body


@csrf_exempt  # a POST to an unknown path is a 404 in the error shape, not a CSRF page
def api_not_found(request, unknown: str) -> JsonResponse:
    """Unknown paths under /api/v1/ answer in the one error shape, not Django's HTML page."""
    return JsonResponse(
        error_body("not_found", f"no API endpoint at /api/v1/{unknown}"), status=404
    )

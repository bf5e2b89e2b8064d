"""The drop-in endpoints: `POST /openai/v1/chat/completions`, `GET /openai/v1/models`,
`POST /openai/v1/responses`, `POST /anthropic/v1/messages`, `POST /anthropic/v1/messages/count_tokens`,
`HEAD /anthropic` (the base, probed by Claude Code).

Plain Django views (not DRF): each wire has its own error shape and stream format, which
the SDKs parse byte for byte. A view names its wire and hands the request to the one
request pipeline (dropin/pipeline.py); no rule lives here.
"""

from __future__ import annotations

from django.http import HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from dropin import pipeline
from dropin.wires import anthropic, openai_chat, openai_responses


@csrf_exempt
@require_POST
def chat_completions(request) -> HttpResponse:
    return pipeline.serve(request, openai_chat)


@csrf_exempt
@require_POST
def responses(request) -> HttpResponse:
    return pipeline.serve(request, openai_responses)


@csrf_exempt
@require_http_methods(["GET", "DELETE"])
def response_detail(request, response_id: str) -> HttpResponse:
    return pipeline.stored_response(request, openai_responses, response_id)


@require_GET
def openai_models(request) -> HttpResponse:
    return pipeline.models_list(request, openai_chat)


@csrf_exempt
@require_POST
def anthropic_messages(request) -> HttpResponse:
    return pipeline.serve(request, anthropic)


@require_http_methods(["HEAD", "GET"])
def anthropic_base(request) -> HttpResponse:
    return pipeline.base_probe(request)


@csrf_exempt
@require_POST
def anthropic_count_tokens(request) -> HttpResponse:
    return pipeline.count_tokens(request, anthropic)

from django.urls import path

from retrieval import apis

urlpatterns = [
    path("describe/<str:item_id>/", apis.DescribeApi.as_view(), name="describe"),
    path("grep/", apis.GrepApi.as_view(), name="grep"),
    path("expand/", apis.ExpandApi.as_view(), name="expand"),
    path("expansions/", apis.ExpansionApi.as_view(), name="expansion-create"),
    path("tools/", apis.ToolListApi.as_view(), name="tool-list"),
    path("tools/call/", apis.ToolCallApi.as_view(), name="tool-call"),
]

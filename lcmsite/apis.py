"""Endpoints that join two apps' views under one URL: only the project package knows both.

A detail URL's GET belongs to the app that owns the rows; its DELETE is the security
app's hard delete, which reaches every app's rows (docs/security.md). Each class here is
the two views combined, each method keeping its own schema annotations.
"""

from conversations.apis import ConversationDetailApi
from security.apis import ConversationHardDeleteApi, SessionHardDeleteApi
from turns.apis import SessionDetailApi


class ConversationDetailDeleteApi(ConversationDetailApi, ConversationHardDeleteApi):
    pass  # GET conversations/{id}/ (conversations), DELETE (security)


class SessionDetailDeleteApi(SessionDetailApi, SessionHardDeleteApi):
    pass  # GET sessions/{id}/ (turns), DELETE (security)

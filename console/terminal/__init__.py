"""The terminal chat client (`manage.py lcm_chat`): the console's header, streaming and
commands over the HTTP API, with the standard library only.

- `client.py`: JSON and event-stream requests to one server with one token;
- `sse.py`: the Server-Sent Events reader the streams go through;
- `chat.py`: the read-eval-print loop (header, streamed answers, slash commands).
"""

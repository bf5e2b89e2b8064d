"""The terminal chat client (`manage.py lcm_chat`): the console's header, streaming and
commands over the HTTP API, with the standard library only.

- `client.py`: JSON and event-stream requests to one server with one token;
- `sse.py`: the Server-Sent Events reader the streams go through;
- `chat.py`: the read-eval-print loop;
- `state.py`: what the chat holds (session, model, attached chunks) and its header's refresh;
- `header.py`: the status line;
- `streaming.py`: one message sent and its answer shown as it streams, resumed after a drop;
- `commands.py`: the slash commands' parsing, dispatch and `/help`, with the session's own
  commands; `turns_view.py`, `branches.py` and `memory.py` hold the others by subject.
"""

"""A stand-in for the Anthropic Messages API on a loopback port: `POST /v1/messages` answers
with the next scripted reply, streamed in the documented server-sent-event format
(message_start, content_block_start/delta/stop for text, thinking and tool_use with
input_json_delta, message_delta with the stop reason, message_stop; or an error event).
`POST /v1/chat/completions` answers a text reply as OpenAI's Chat Completions API streams it
(chat.completion.chunk events, a usage chunk, `data: [DONE]`), for tests that switch a
session to another provider. Every request body and path is kept, so a test can read what
the model was sent, and to which API.
"""

import json
import queue
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _event(name, data):
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


class Reply:
    """One streamed answer, built block by block."""

    def __init__(self):
        self.blocks = []  # (kind, payload)
        self.stop = "end_turn"
        self.pause = 0.0  # seconds between deltas
        self.error = None

    def text(self, *chunks):
        self.blocks.append(("text", list(chunks)))
        return self

    def thinking(self, *chunks):
        self.blocks.append(("thinking", list(chunks)))
        return self

    def tool(self, call_id, name, arguments):
        """A tool_use block whose input arrives as input_json_delta pieces."""
        raw = json.dumps(arguments)
        pieces = [raw[i : i + 7] for i in range(0, len(raw), 7)]
        self.blocks.append(("tool_use", (call_id, name, pieces)))
        self.stop = "tool_use"
        return self

    def stop_reason(self, reason):
        self.stop = reason
        return self

    def slowly(self, seconds):
        self.pause = seconds
        return self

    def fail_with(self, kind, message):
        self.error = (kind, message)
        return self

    def events(self):
        yield _event(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_test",
                    "type": "message",
                    "role": "assistant",
                    "model": "test-model",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 12, "output_tokens": 1},
                },
            },
        )
        for index, (kind, payload) in enumerate(self.blocks):
            if kind == "text":
                start = {"type": "text", "text": ""}
                deltas = [{"type": "text_delta", "text": c} for c in payload]
            elif kind == "thinking":
                start = {"type": "thinking", "thinking": ""}
                deltas = [{"type": "thinking_delta", "thinking": c} for c in payload]
                deltas.append({"type": "signature_delta", "signature": "sig"})
            else:
                call_id, name, pieces = payload
                start = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
                deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
            yield _event(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
            for delta in deltas:
                if self.pause:
                    yield self.pause
                yield _event(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            yield _event("content_block_stop", {"type": "content_block_stop", "index": index})
        if self.error:
            kind, message = self.error
            yield _event("error", {"type": "error", "error": {"type": kind, "message": message}})
            return
        yield _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": self.stop, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        )
        yield _event("message_stop", {"type": "message_stop"})


def _chunk(delta, finish=None, usage=None):
    chunk = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "test-model",
        "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage:
        chunk["usage"] = usage
    return f"data: {json.dumps(chunk)}\n\n".encode()


def openai_events(reply):
    """A text reply as OpenAI's Chat Completions API streams it."""
    yield _chunk({"role": "assistant", "content": ""})
    for kind, payload in reply.blocks:
        assert kind == "text", "the OpenAI stand-in streams text replies only"
        for piece in payload:
            yield _chunk({"content": piece})
    yield _chunk({}, finish="stop")
    yield _chunk({}, usage={"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17})
    yield b"data: [DONE]\n\n"


class FakeAnthropic:
    """The server: push replies, then read `requests` (the JSON bodies, in order)."""

    def __init__(self):
        self.replies = queue.Queue()
        self.requests = []
        self.paths = []
        # The key each request carried (`x-api-key`), as the provider got it.
        self.keys = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                server.requests.append(json.loads(body))
                server.paths.append(self.path)
                server.keys.append(self.headers.get("x-api-key"))
                try:
                    reply = server.replies.get(timeout=10)
                except queue.Empty:
                    self.send_response(500)
                    self.send_header("content-type", "application/json")
                    data = json.dumps(
                        {"type": "error", "error": {"type": "api_error", "message": "no reply scripted"}}
                    ).encode()
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                try:
                    openai = self.path.endswith("/chat/completions")
                    for piece in openai_events(reply) if openai else reply.events():
                        if isinstance(piece, float):
                            time.sleep(piece)
                            continue
                        self.wfile.write(piece)
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass
                self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def push(self, reply):
        self.replies.put(reply)

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

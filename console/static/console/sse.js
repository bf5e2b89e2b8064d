/* A small Server-Sent Events reader over fetch(), so one code path serves both the POST that
   creates a turn (EventSource cannot POST) and the GET that resumes it. It parses the
   text/event-stream format (id:, event:, data:, comments, blank-line dispatch) and reports
   how the connection ended, so the caller can resume with ?after=<last id>.

   lcmSse.read(response, onEvent) -> Promise<"closed">; onEvent({id, event, data}) gets data
   parsed as JSON when it is JSON. Bytes are decoded as UTF-8 across chunk boundaries. */
(function () {
  "use strict";

  function parseBlock(block) {
    var message = { id: null, event: "message", data: "" };
    var dataLines = [];
    block.split("\n").forEach(function (line) {
      if (!line || line.charAt(0) === ":") return;
      var colon = line.indexOf(":");
      var field = colon < 0 ? line : line.slice(0, colon);
      var value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.charAt(0) === " ") value = value.slice(1);
      if (field === "id") message.id = value;
      else if (field === "event") message.event = value;
      else if (field === "data") dataLines.push(value);
    });
    if (!dataLines.length && message.id === null) return null;
    message.data = dataLines.join("\n");
    try { message.data = JSON.parse(message.data); } catch (e) { /* plain text data */ }
    return message;
  }

  function read(response, onEvent) {
    var reader = response.body.getReader();
    var decoder = new TextDecoder("utf-8");
    var buffer = "";
    function pump() {
      return reader.read().then(function (chunk) {
        if (chunk.done) {
          buffer += decoder.decode();
          return "closed";
        }
        buffer += decoder.decode(chunk.value, { stream: true }).replace(/\r\n?/g, "\n");
        var end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          var message = parseBlock(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
          if (message) onEvent(message);
        }
        return pump();
      });
    }
    return pump();
  }

  window.lcmSse = { read: read, parseBlock: parseBlock };
})();

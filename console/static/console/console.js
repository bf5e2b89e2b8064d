/* The chat console page: the live header, the composer and streaming, and the command
   panels. No inline script (the Content-Security-Policy forbids it): the page carries its
   URLs in data-* attributes on #chat. Server-rendered fragments (turns, history, branches,
   pins, pending) are escaped by Django; JSON from the API (chunks, retrieval hits, stream
   text) only ever reaches the page through textContent. Helpers from explorer.js:
   window.lcm.sendJson / getHtml / csrfToken. */
(function () {
  "use strict";
  var chat = document.getElementById("chat");
  if (!chat) return;
  var cfg = chat.dataset;
  // A server restart takes seconds: keep trying for about a minute, backing off to 2 s.
  var RESUME_ATTEMPTS = 40;
  var RESUME_DELAY_MS = 300;
  var RESUME_MAX_DELAY_MS = 2000;
  var STATUS_POLL_MS = 1500;

  function $(id) { return document.getElementById(id); }
  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function errorText(reply) {
    var data = reply.data || {};
    return (data.code || "error " + reply.status) + ": " + (data.message || "request failed");
  }
  function say(text, state) {
    var note = $("console-note");
    note.textContent = text;
    note.dataset.state = state || "";
  }
  function api(path) { return cfg.api + path; }
  function fillUrl(template, values) {
    return Object.keys(values).reduce(function (url, key) {
      return url.split(key).join(encodeURIComponent(values[key]));
    }, template);
  }

  // ---- the header -------------------------------------------------------------------------
  var live = { phase: null, streaming: false, pollTimer: null };

  function setText(id, value) { var node = $(id); if (node) node.textContent = value; }

  function showStatus(status) {
    setText("h-branch", status.branch_label);
    $("h-branch").dataset.branch = status.branch_id;
    setText("h-head-seq", status.head_seq === null ? "none" : String(status.head_seq));
    setText("h-head-id", status.head_state_id || "");
    setText("h-pending", String(status.pending));
    if (!live.streaming) setText("h-phase", status.phase || "idle");
    chat.dataset.pending = String(status.pending);
    showTurnPhases(status.turn_phases || {});
    // Poll while a turn is pending or still on its way to done (commit, then indexing),
    // so the header and the chips follow the phase without a reload.
    var settled = !status.phase || FINAL_PHASES.indexOf(status.phase) >= 0;
    if (status.pending > 0 || !settled) schedulePoll(); else stopPoll();
  }

  var FINAL_PHASES = ["done", "failed"];
  // Each turn's phase chip (the transcript's articles, the pending list) follows the phase
  // the status reports.
  function showTurnPhases(phases) {
    Object.keys(phases).forEach(function (turnId) {
      var phase = phases[turnId];
      document.querySelectorAll('[data-turn="' + CSS.escape(turnId) + '"]').forEach(function (node) {
        if (node.tagName === "ARTICLE") {
          if (node.dataset.phase && node.dataset.phase !== phase) {
            node.classList.remove("phase-" + node.dataset.phase);
            node.classList.add("phase-" + phase);
          }
          node.dataset.phase = phase;
          var chip = node.querySelector(".chip.phase");
          if (chip) chip.textContent = phase;
        } else {
          var first = node.querySelector(".chip");
          if (first) first.textContent = phase;
        }
      });
    });
  }

  function refreshStatus() {
    return window.lcm.sendJson("GET", cfg.statusUrl).then(function (reply) {
      if (reply.status === 200) showStatus(reply.data);
      return reply;
    });
  }

  function schedulePoll() {
    if (live.pollTimer) return;
    live.pollTimer = window.setTimeout(function () {
      live.pollTimer = null;
      refreshStatus();
    }, STATUS_POLL_MS);
  }
  function stopPoll() {
    if (live.pollTimer) window.clearTimeout(live.pollTimer);
    live.pollTimer = null;
  }

  function utf8Length(text) {
    return new TextEncoder().encode(text).length;
  }

  function showStream(durable, displayed) {
    $("h-stream").hidden = false;
    setText("h-durable", String(durable));
    setText("h-displayed", String(displayed));
    $("h-buffered").hidden = !(displayed > durable);
    $("h-stream").dataset.buffered = displayed > durable ? "true" : "false";
  }

  // ---- streaming a turn ---------------------------------------------------------------------
  // One turn at a time: `current` holds its article, the last event id seen, and the text
  // shown, so a resumed connection continues exactly after the last event it applied.
  var current = null;

  function newTurnArticle(userText) {
    var article = el("article", "turn streaming");
    var user = el("div", "msg user");
    user.appendChild(el("span", "who", "you"));
    user.appendChild(el("div", "text", userText));
    var answer = el("div", "msg assistant");
    answer.appendChild(el("span", "who", "assistant"));
    var text = el("div", "text answer");
    answer.appendChild(text);
    var calls = el("ul", "tool-calls");
    answer.appendChild(calls);
    article.appendChild(user);
    article.appendChild(answer);
    $("transcript").appendChild(article);
    $("empty-transcript") && $("empty-transcript").remove();
    return { article: article, text: text, calls: calls };
  }

  function applyEvent(message) {
    if (!current) return;
    var id = message.id === null ? NaN : Number(message.id);
    if (!isNaN(id)) {
      if (id <= current.lastId) return;  // a replayed event already applied: never twice
      current.lastId = id;
      current.applied.push(id);
      current.article.dataset.lastEvent = String(id);
    }
    var data = message.data || {};
    switch (message.event) {
      case "turn":
        if (data.turn_id && !current.turnId) {
          current.turnId = data.turn_id;
          current.article.dataset.turn = data.turn_id;
        }
        if (data.phase) setText("h-phase", data.phase);
        break;
      case "context":
        current.article.dataset.context = "ready";
        setText("h-phase", "context_prepared");
        break;
      case "delta":
        // Displayed bytes count here, as text reaches the page; durable ones come from the
        // server's `durable` events (after each fsync of the journal).
        current.displayed += utf8Length(data.text || "");
        showStream(current.durable, current.displayed);
        if (!current.shown && !current.firstPaint) {
          // When the first text is on screen: after the next frame is painted.
          var timing = current;
          window.requestAnimationFrame(function () {
            window.setTimeout(function () {
              timing.firstPaint = Date.now();
              window.lcmConsole.firstPaint[timing.turnId] = timing.firstPaint;
            }, 0);
          });
          current.firstPaint = -1;
        }
        current.shown += data.text || "";
        current.text.textContent = current.shown;
        current.article.dataset.deltas = String(Number(current.article.dataset.deltas || 0) + 1);
        break;
      case "tool_call":
        current.calls.appendChild(el("li", "tool-call", "tool call: " + (data.name || "?")));
        break;
      case "step":
        if (data.status === "streaming") {
          setText("h-phase", "responding");
          current.displayed = 0;  // the journal counts bytes per provider step
          current.durable = 0;
          showStream(0, 0);
        }
        break;
      case "tool_result":
        current.calls.appendChild(el("li", "tool-result" + (data.is_error ? " tool-error" : ""),
          "tool result: " + (data.name || "?") + (data.is_error ? " (error)" : "")));
        break;
      case "durable":
        current.durable = data.durable || 0;
        current.displayed = Math.max(current.displayed, data.displayed || 0);
        showStream(current.durable, current.displayed);
        break;
      case "done":
        current.finished = true;
        setText("h-phase", data.phase || "response_finalized");
        break;
      case "error":
        current.finished = true;
        current.failed = data;
        setText("h-phase", data.phase || "failed");
        break;
      default:
        break;
    }
  }

  function finishTurn() {
    var turn = current;
    $("h-stream").hidden = true;  // the indicator is for a stream in progress (SRD 13.3)
    // What streamed, kept for a look after the server-rendered turn replaced it (and tests).
    window.lcmConsole.lastStream = {
      turn: turn.turnId, text: turn.shown, applied: turn.applied, resumes: turn.resumes,
    };
    live.streaming = false;
    $("send").disabled = false;
    if (turn.failed) say((turn.failed.code || "error") + ": " + (turn.failed.message || ""), "failed");
    else say("", "");
    // The server-rendered turn replaces the streamed one: one rendering of a finished turn.
    var done = turn.turnId
      ? window.lcm.getHtml(fillUrl(cfg.turnUrl, { TURN_ID: turn.turnId })).then(function (html) {
          turn.article.insertAdjacentHTML("afterend", html);
          turn.article.remove();
        })
      : Promise.resolve();
    current = null;
    return done.then(refreshStatus).then(function () {
      chat.dataset.idle = "true";
    });
  }

  // Reads one connection until it closes. A close before `done`/`error` is a dropped
  // connection: resume from the journal with ?after=<last id> (no gaps: the server replays
  // everything after it; no duplicates: ids at or below it are ignored).
  function follow(response, attempt) {
    if (!response.ok) {
      return response.json().then(
        function (data) { return Promise.reject({ api: true, status: response.status, data: data }); },
        function () { return Promise.reject({ api: true, status: response.status, data: null }); }
      );
    }
    return window.lcmSse.read(response, applyEvent).then(
      function () { return afterClose(attempt); },
      function () { return afterClose(attempt); }
    );
  }

  function afterClose(attempt) {
    if (!current) return null;
    if (current.finished) return finishTurn();
    if (!current.turnId || attempt >= RESUME_ATTEMPTS) {
      say("the stream was lost; reload the page to see the turn", "failed");
      live.streaming = false;
      $("send").disabled = false;
      return null;
    }
    current.resumes += 1;
    current.article.dataset.resumes = String(current.resumes);
    say("connection dropped: resuming after event " + current.lastId + "…", "pending");
    var delay = Math.min(RESUME_DELAY_MS * (attempt + 1), RESUME_MAX_DELAY_MS);
    return new Promise(function (resolve) { window.setTimeout(resolve, delay); })
      .then(function () { return openResume(attempt + 1); });
  }

  function openResume(attempt) {
    var url = fillUrl(cfg.streamUrl, { TURN_ID: current.turnId }) + "?after=" + current.lastId;
    current.controller = new AbortController();
    return fetch(url, {
      credentials: "same-origin",
      headers: { Accept: "text/event-stream", "Last-Event-ID": String(current.lastId) },
      signal: current.controller.signal,
    }).then(
      function (response) {
        if (response.status >= 500) return afterClose(attempt);
        return follow(response, attempt);
      },
      function () { return afterClose(attempt); }
    );
  }

  function sendTurn(content) {
    var body = { content: content, model: $("model").value, tools_mode: $("tools-mode").value };
    var attached = attachedIds();
    if (attached.length) body.attach_chunk_ids = attached;
    current = newTurnArticle(content);
    current.applied = [];
    current.displayed = 0;
    current.durable = 0;
    current.lastId = 0;
    current.shown = "";
    current.resumes = 0;
    current.controller = new AbortController();
    live.streaming = true;
    chat.dataset.idle = "false";
    $("send").disabled = true;
    setText("h-phase", "accepted");
    $("h-stream").hidden = true;
    say("sending…", "pending");
    return fetch(cfg.turnsUrl, {
      method: "POST",
      credentials: "same-origin",
      headers: {
        "Content-Type": "application/json",
        Accept: "text/event-stream",
        "X-CSRFToken": window.lcm.csrfToken(),
      },
      body: JSON.stringify(Object.assign({ stream: true }, body)),
      signal: current.controller.signal,
    }).then(
      function (response) {
        clearAttached();
        return follow(response, 0);
      },
      function () { return afterClose(0); }
    ).catch(function (failure) {
      if (current) { current.article.remove(); current = null; }
      live.streaming = false;
      $("send").disabled = false;
      chat.dataset.idle = "true";
      say(failure && failure.api ? errorText(failure) : "request failed: " + failure, "failed");
      refreshStatus();
    });
  }

  $("composer").addEventListener("submit", function (event) {
    event.preventDefault();
    var box = $("message");
    var content = box.value.trim();
    if (!content || live.streaming) return;
    box.value = "";
    sendTurn(content);
  });
  $("message").addEventListener("keydown", function (event) {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
  });

  // ---- models -------------------------------------------------------------------------------
  function loadModels() {
    var select = $("model");
    return window.lcm.sendJson("GET", cfg.modelsUrl).then(function (reply) {
      if (reply.status !== 200) return;
      var rows = Array.isArray(reply.data) ? reply.data : reply.data.results || reply.data.models || [];
      var chosen = select.value || cfg.defaultModel;
      select.textContent = "";
      rows.forEach(function (model) {
        var option = el("option", "", model.name + " (" + model.provider + (model.available === false ? ", no key" : "") + ")");
        option.value = model.name;
        if (model.available === false) option.disabled = true;
        select.appendChild(option);
      });
      if (chosen) select.value = chosen;
      if (!select.value && select.options.length) select.selectedIndex = 0;
      select.dataset.loaded = "true";
    });
  }

  // ---- panels -------------------------------------------------------------------------------
  var panels = {};
  Array.prototype.forEach.call(document.querySelectorAll("[data-panel]"), function (panel) {
    panels[panel.dataset.panel] = panel;
  });

  function loadFragment(name) {
    var panel = panels[name];
    var url = panel.dataset.url;
    if (!url) return Promise.resolve();
    var body = panel.querySelector(".panel-body");
    return window.lcm.getHtml(url).then(function (html) {
      body.innerHTML = html;  // server-rendered, auto-escaped
      panel.dataset.loaded = "true";
    }, function (error) { body.textContent = error.message; });
  }

  function openPanel(name) {
    Object.keys(panels).forEach(function (key) { panels[key].hidden = key !== name; });
    document.querySelectorAll("[data-command]").forEach(function (button) {
      button.classList.toggle("active", button.dataset.command === name);
    });
    $("side").dataset.open = name;
    var panel = panels[name];
    var focus = panel.querySelector("input, select, textarea");
    var loading = loadFragment(name);
    if (focus) focus.focus();
    return loading;
  }

  function closePanels() {
    Object.keys(panels).forEach(function (key) { panels[key].hidden = true; });
    document.querySelectorAll("[data-command]").forEach(function (b) { b.classList.remove("active"); });
    $("side").dataset.open = "";
  }

  function refreshOpenPanel() {
    var open = $("side").dataset.open;
    return open ? loadFragment(open) : Promise.resolve();
  }

  // ---- actions through the API ---------------------------------------------------------------
  function act(method, url, body, expect, after) {
    return window.lcm.sendJson(method, url, body).then(function (reply) {
      if (expect.indexOf(reply.status) < 0) { say(errorText(reply), "failed"); return reply; }
      return Promise.resolve(after ? after(reply) : null).then(function () { return reply; });
    });
  }

  function reloadChat(message) {
    say(message, "succeeded");
    window.location.assign(cfg.chatUrl);
  }

  function commandCommit() {
    say("committing pending turns…", "pending");
    return act("POST", api("branches/" + cfg.branch + "/commit/"), {}, [200, 201, 202], function (reply) {
      say("commit requested", "succeeded");
      return refreshStatus().then(refreshOpenPanel);
    });
  }

  document.addEventListener("click", function (event) {
    var target = event.target.closest("button, a");
    if (!target || !chat.contains(target) && !target.closest(".help")) return;
    var data = target.dataset;
    if (data.command) {
      event.preventDefault();
      if (data.command === "commit") commandCommit();
      else if (data.command === "help") toggleHelp();
      else if ($("side").dataset.open === data.command) closePanels();
      else openPanel(data.command);
    } else if (data.fork !== undefined) {
      event.preventDefault();
      act("POST", api("branches/" + cfg.branch + "/fork/"), data.fork ? { turn_id: data.fork } : {}, [200, 201], function (reply) {
        var branch = reply.data.id || (reply.data.branch && reply.data.branch.id);
        return act("POST", api("sessions/" + cfg.session + "/activate-branch/"), { branch_id: branch }, [200], function () {
          reloadChat("forked into branch " + branch);
        });
      });
    } else if (data.rollback !== undefined) {
      event.preventDefault();
      // A rollback is a new branch whose head is that state: switch to it.
      act("POST", api("branches/" + cfg.branch + "/rollback/"), { state_seq: Number(data.rollback) }, [200, 201], function (reply) {
        var branch = reply.data.id || (reply.data.branch && reply.data.branch.id);
        return act("POST", api("sessions/" + cfg.session + "/activate-branch/"), { branch_id: branch }, [200], function () {
          reloadChat("rolled back to state " + data.rollback + " in branch " + branch);
        });
      });
    } else if (data.activate) {
      event.preventDefault();
      act("POST", api("sessions/" + cfg.session + "/activate-branch/"), { branch_id: data.activate }, [200], function () {
        reloadChat("switched branch");
      });
    } else if (data.unpin) {
      event.preventDefault();
      act("DELETE", api("branches/" + cfg.branch + "/pins/" + encodeURIComponent(data.unpin) + "/"), undefined, [200, 204], function () {
        say("unpinned", "succeeded");
        return refreshStatus().then(function () { return loadFragment("pins"); });
      });
    } else if (data.attach) {
      event.preventDefault();
      addAttached(data.attach, data.label || data.attach);
    } else if (data.detach) {
      event.preventDefault();
      target.closest("li").remove();
      syncAttached();
    }
  });

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form.id === "pin-form") {
      event.preventDefault();
      var input = form.querySelector("input[name=text]");
      act("POST", api("branches/" + cfg.branch + "/pins/"), { text: input.value }, [200, 201], function () {
        input.value = "";
        say("pinned", "succeeded");
        return refreshStatus().then(function () { return loadFragment("pins"); });
      });
    } else if (form.id === "chunk-search") {
      event.preventDefault();
      searchChunks(form.querySelector("input[name=q]").value);
    } else if (form.id === "retrieve-form") {
      event.preventDefault();
      retrieve(form.querySelector("input[name=query]").value);
    }
  });

  // ---- memory: chunk browser and manual retrieval (JSON -> DOM through textContent) ---------
  function chunkItem(chunk, score) {
    var id = chunk.id || chunk.chunk_id;
    var li = el("li", "chunk");
    li.dataset.chunk = id;
    var head = el("div", "chunk-head");
    head.appendChild(el("code", "", id));
    if (chunk.chunk_type) head.appendChild(el("span", "chip", chunk.chunk_type));
    if (chunk.seq_start !== undefined) head.appendChild(el("span", "muted", "messages " + chunk.seq_start + "–" + chunk.seq_end));
    if (score !== undefined && score !== null) head.appendChild(el("span", "chip score", "sim " + Number(score).toFixed(3)));
    var attach = el("button", "small", "Attach");
    attach.type = "button";
    attach.dataset.attach = id;
    attach.dataset.label = (chunk.text || "").slice(0, 40);
    head.appendChild(attach);
    li.appendChild(head);
    li.appendChild(el("div", "chunk-text", chunk.text || chunk.content || ""));
    return li;
  }

  function listInto(listId, rows, scoreOf) {
    var list = $(listId);
    list.textContent = "";
    if (!rows.length) list.appendChild(el("li", "muted", "nothing found"));
    rows.forEach(function (row) {
      var chunk = row.chunk || row;
      list.appendChild(chunkItem(chunk, scoreOf ? scoreOf(row) : null));
    });
    list.dataset.count = String(rows.length);
  }

  function searchChunks(query) {
    var url = api("branches/" + cfg.branch + "/chunks/") + (query ? "?q=" + encodeURIComponent(query) : "");
    return window.lcm.sendJson("GET", url).then(function (reply) {
      if (reply.status !== 200) { say(errorText(reply), "failed"); return; }
      var rows = Array.isArray(reply.data) ? reply.data : reply.data.results || [];
      listInto("chunk-results", rows);
    });
  }

  function retrieve(query) {
    return window.lcm.sendJson("POST", api("branches/" + cfg.branch + "/retrieve/"), { query: query, top_k: 8 }).then(function (reply) {
      if (reply.status !== 200) { say(errorText(reply), "failed"); return; }
      var rows = Array.isArray(reply.data) ? reply.data : reply.data.results || reply.data.hits || [];
      listInto("retrieve-results", rows, function (row) {
        return row.similarity !== undefined ? row.similarity : row.score;
      });
    });
  }

  function attachedIds() {
    return Array.prototype.map.call(document.querySelectorAll("#attached li[data-chunk]"), function (li) {
      return li.dataset.chunk;
    });
  }
  function syncAttached() {
    var count = attachedIds().length;
    $("attached").hidden = count === 0;
    $("attached").dataset.count = String(count);
  }
  function addAttached(id, label) {
    if (attachedIds().indexOf(id) >= 0) return;
    var li = el("li", "chip", label + " ");
    li.dataset.chunk = id;
    var remove = el("button", "small", "×");
    remove.type = "button";
    remove.dataset.detach = id;
    remove.title = "do not attach";
    li.appendChild(remove);
    $("attached-list").appendChild(li);
    syncAttached();
    say("chunk " + id + " will be attached to the next turn", "succeeded");
  }
  function clearAttached() {
    $("attached-list").textContent = "";
    syncAttached();
  }

  // ---- keyboard shortcuts (documented in the help overlay) -----------------------------------
  var SHORTCUTS = {
    m: function () { $("model").focus(); },
    t: function () { $("tools-mode").focus(); },
    h: function () { openPanel("history"); },
    c: function () { openPanel("chunks"); },
    b: function () { openPanel("branches"); },
    p: function () { openPanel("pins"); },
    r: function () { openPanel("retrieve"); },
    i: function () { openPanel("pending"); },
    C: function () { commandCommit(); },
    f: function () { var last = lastTurnButton("fork"); if (last) last.click(); },
    "/": function () { $("message").focus(); },
    "?": function () { toggleHelp(); },
  };

  function lastTurnButton(kind) {
    var buttons = document.querySelectorAll("#transcript [data-" + kind + "]");
    return buttons.length ? buttons[buttons.length - 1] : null;
  }

  function toggleHelp(force) {
    var help = $("help");
    help.hidden = force === undefined ? !help.hidden : !force;
  }

  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape") {
      toggleHelp(false);
      closePanels();
      if (document.activeElement) document.activeElement.blur();
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    var tag = (event.target.tagName || "").toLowerCase();
    if (tag === "input" || tag === "textarea" || tag === "select" || event.target.isContentEditable) return;
    var handler = SHORTCUTS[event.key];
    if (handler) {
      event.preventDefault();
      handler();
    }
  });

  // A test hook, and a way to see the resume for yourself: drop the live connection.
  window.lcmConsole = {
    dropStream: function () {
      if (current && current.controller) current.controller.abort();
      return !!current;
    },
    refreshStatus: refreshStatus,
    firstPaint: {},  // turn id -> when its first text was painted (epoch ms; benchmarks)
  };

  loadModels();
  refreshStatus();
  // A turn still running when the page loaded (another tab, or a reload mid-stream): follow it.
  if (cfg.runningTurn) {
    current = { article: null, lastId: 0, shown: "", resumes: 0, turnId: cfg.runningTurn, applied: [],
      displayed: 0, durable: 0 };
    var running = document.querySelector("[data-turn='" + cfg.runningTurn + "']");
    if (running) running.remove();
    var parts = newTurnArticle(cfg.runningText || "");
    current.article = parts.article;
    current.text = parts.text;
    current.calls = parts.calls;
    current.article.dataset.turn = cfg.runningTurn;
    live.streaming = true;
    $("send").disabled = true;
    openResume(0);
  }
})();

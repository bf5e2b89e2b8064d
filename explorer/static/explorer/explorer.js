/* Explorer page helpers: CSRF-aware fetch, "load more" for paged lists, action buttons.
   No inline script anywhere (the Content-Security-Policy forbids it): pages carry data in
   data-* attributes and json_script blocks, and this file wires them up. Fragments fetched
   here are server-rendered with Django's auto-escaping, so inserting them is safe. */
(function () {
  "use strict";

  function csrfToken() {
    var match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    if (match) return decodeURIComponent(match[1]);
    var input = document.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function getHtml(url) {
    return fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } }).then(
      function (response) {
        if (!response.ok) throw new Error(url + " answered " + response.status);
        return response.text();
      }
    );
  }

  function sendJson(method, url, body) {
    return fetch(url, {
      method: method,
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken(), Accept: "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    }).then(function (response) {
      return response.json().then(
        function (data) { return { status: response.status, data: data }; },
        function () { return { status: response.status, data: null }; }
      );
    });
  }

  // "Load more" buttons replace themselves with the next page of a list.
  document.addEventListener("click", function (event) {
    var button = event.target.closest("button.load-more");
    if (!button) return;
    button.disabled = true;
    var holder = button.closest("li") || button;
    getHtml(button.dataset.url).then(
      function (html) { holder.insertAdjacentHTML("afterend", html); holder.remove(); },
      function (error) { button.disabled = false; button.textContent = "Retry (" + error.message + ")"; }
    );
  });

  window.lcm = { csrfToken: csrfToken, getHtml: getHtml, sendJson: sendJson };
})();

/* Actions on the conversation page: "compact now" queues a job through the API and polls
   it until it finishes, then refreshes the context panel in place; "run integrity scan"
   runs a scan through the API and shows its findings. */
(function () {
  "use strict";
  var status = document.getElementById("action-status");
  if (!status) return;
  var POLL_MS = 700;

  function say(text, state) {
    status.textContent = text;
    status.dataset.state = state || "";
  }

  function errorText(reply) {
    var data = reply.data || {};
    return (data.code || "error " + reply.status) + ": " + (data.message || "request failed");
  }

  function refreshPanel(url) {
    return window.lcm.getHtml(url).then(function (html) {
      var panel = document.getElementById("context-panel");
      if (panel) panel.outerHTML = html;
    });
  }

  function describeResult(job) {
    var r = job.result || {};
    var created = (r.summaries_created || []).length;
    return "job " + job.id + " " + job.state + ": " + (r.status || job.error || "") +
      (r.status ? ", " + created + " new summaries, context " + r.tokens_before + " → " + r.tokens_after + " tokens" : "");
  }

  var compactForm = document.getElementById("compact-form");
  if (compactForm) {
    compactForm.addEventListener("submit", function (event) {
      event.preventDefault();
      var button = compactForm.querySelector("button");
      button.disabled = true;
      say("queueing compaction…", "pending");
      var mode = compactForm.querySelector("select[name=mode]").value;
      window.lcm.sendJson("POST", compactForm.dataset.api, { mode: mode }).then(function (reply) {
        if (reply.status !== 202) {
          say(errorText(reply), "failed");
          button.disabled = false;
          return;
        }
        var jobUrl = compactForm.dataset.jobApi.replace("JOB_ID", reply.data.id);
        var poll = function (job) {
          if (job.state === "pending" || job.state === "running") {
            say("job " + job.id + " " + job.state + "…", job.state);
            window.setTimeout(function () {
              window.lcm.sendJson("GET", jobUrl).then(function (next) {
                if (next.status !== 200) { say(errorText(next), "failed"); button.disabled = false; return; }
                poll(next.data);
              });
            }, POLL_MS);
            return;
          }
          say(describeResult(job), job.state);
          button.disabled = false;
          refreshPanel(compactForm.dataset.panel);
        };
        poll(reply.data);
      }, function (error) {
        say("request failed: " + error.message, "failed");
        button.disabled = false;
      });
    });
  }

  var integrityForm = document.getElementById("integrity-form");
  if (integrityForm) {
    integrityForm.addEventListener("submit", function (event) {
      event.preventDefault();
      var button = integrityForm.querySelector("button");
      button.disabled = true;
      say("scanning…", "running");
      var body = { conversation_id: Number(integrityForm.dataset.conversation) };
      window.lcm.sendJson("POST", integrityForm.dataset.api, body).then(function (reply) {
        button.disabled = false;
        if (reply.status !== 201) { say(errorText(reply), "failed"); return; }
        var report = reply.data;
        var failing = (report.checks || []).filter(function (check) { return check.count > 0; });
        var detail = failing.map(function (check) { return check.name + " ×" + check.count; }).join(", ");
        say("integrity report " + report.id + ": " +
            (report.total_problems ? report.total_problems + " problem(s): " + detail : "no problems found"),
            report.total_problems ? "failed" : "succeeded");
      }, function (error) {
        button.disabled = false;
        say("request failed: " + error.message, "failed");
      });
    });
  }
})();

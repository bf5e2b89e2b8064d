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

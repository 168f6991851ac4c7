// The console's answers that a fragment cannot carry: a refusal the page has no place for (403, 404, 5xx) or a
// request that never reached the server is said in the alert bar, never dropped silently. Form errors (400) are
// swapped in beside their fields (see the htmx-config meta of base.html).
(function () {
  function say(text) {
    var bar = document.getElementById("console-alert");
    if (!bar) return;
    bar.querySelector(".console-alert-text").textContent = text;
    bar.hidden = false;
  }
  var meaning = {403: "you are not allowed to do this (signed out, or not an administrator?)",
                 404: "it no longer exists (deleted meanwhile?)", 429: "too many requests: wait a moment"};
  document.addEventListener("htmx:responseError", function (event) {
    var status = event.detail.xhr.status;
    say("Not saved: the server answered " + status + ", " + (meaning[status] || "an error on its side") + ".");
  });
  document.addEventListener("htmx:sendError", function () {
    say("Not saved: the server could not be reached. Check the connection and try again.");
  });
  document.addEventListener("htmx:beforeRequest", function (event) {
    var bar = document.getElementById("console-alert");
    if (bar && event.detail.requestConfig && event.detail.requestConfig.verb !== "get") bar.hidden = true;
  });
  // A task row pushed over /ws/tasks/ replaces its row only while it still matches the list's status filter, and
  // leaves the list when it no longer does; rows not on this page wait for the list's own refresh.
  document.addEventListener("htmx:wsBeforeMessage", function (event) {
    var table = document.getElementById("task-table");
    if (!table || event.target.getAttribute("ws-connect") !== "/ws/tasks/") return;
    event.preventDefault();
    var wanted = table.dataset.statusFilter;
    var active = table.dataset.activeStates.split(" ");
    var holder = document.createElement("template");
    holder.innerHTML = event.detail.message;
    Array.prototype.forEach.call(holder.content.querySelectorAll("tr[id^='task-row-']"), function (row) {
      var shown = document.getElementById(row.id);
      if (!shown) return;
      var status = row.dataset.status;
      if (!wanted || wanted === status || (wanted === "active" && active.indexOf(status) >= 0)) {
        row.removeAttribute("hx-swap-oob");
        shown.replaceWith(row);
        htmx.process(row);
      } else {
        shown.remove();
      }
    });
  });
  // A destructive form (Stop, Revoke, Delete) says what it will do and waits for a yes.
  document.addEventListener("submit", function (event) {
    var question = event.target.dataset && event.target.dataset.confirm;
    if (question && !window.confirm(question)) event.preventDefault();
  }, true);
  // On a phone the sidebar is folded into its Menu button.
  document.addEventListener("click", function (event) {
    var toggle = event.target.closest("#nav-toggle");
    if (!toggle) return;
    var open = toggle.closest(".sidebar").classList.toggle("open");
    toggle.setAttribute("aria-expanded", open ? "true" : "false");
  });
  document.addEventListener("click", function (event) {
    if (event.target.closest("#console-alert button")) document.getElementById("console-alert").hidden = true;
  });
})();

// Archivist console: small progressive enhancements (the pages work without them).
"use strict";
(function () {
  function $(sel, root) { return (root || document).querySelector(sel); }

  // Copy buttons: data-copy="<id of the element whose text to copy>".
  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy]");
    if (!button) return;
    var source = document.getElementById(button.getAttribute("data-copy"));
    if (!source) return;
    var text = source.textContent;
    var done = function () { var old = button.textContent; button.textContent = "Copied"; setTimeout(function () { button.textContent = old; }, 1500); };
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(text).then(done, function () { fallbackCopy(text); done(); });
    } else { fallbackCopy(text); done(); }
  });
  function fallbackCopy(text) {
    var area = document.createElement("textarea");
    area.value = text; document.body.appendChild(area); area.select();
    try { document.execCommand("copy"); } catch (e) { /* ignore */ }
    area.remove();
  }

  // Dialog openers: data-open="<dialog id>".
  document.addEventListener("click", function (event) {
    var opener = event.target.closest("[data-open]");
    if (!opener) return;
    var dialog = document.getElementById(opener.getAttribute("data-open"));
    if (dialog && dialog.showModal) { dialog.showModal(); }
  });

  // Upload size check before sending.
  var file = $("#file-input");
  if (file) {
    file.addEventListener("change", function () {
      var max = parseInt(file.getAttribute("data-max-bytes"), 10);
      file.setCustomValidity(file.files[0] && file.files[0].size > max ? "This file is over the upload limit." : "");
    });
  }

  // Live job progress: poll the status endpoint until the job finishes.
  var job = $("#job");
  if (job && job.getAttribute("data-finished") !== "true") {
    var id = job.getAttribute("data-job-id");
    var timer = setInterval(function () {
      fetch("/jobs/" + encodeURIComponent(id) + "/status", { headers: { Accept: "application/json" }, credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (data) { if (data) update(data); })
        .catch(function () { /* keep polling */ });
    }, 1000);
    function update(data) {
      job.querySelectorAll("[data-field]").forEach(function (el) {
        var key = el.getAttribute("data-field");
        if (key in data) el.textContent = data[key];
      });
      var status = $("#job-status");
      status.className = "status status-" + data.status;
      var done = data.pages_crawled + data.pages_failed + data.pages_skipped;
      var bar = $("#job-progress");
      bar.max = Math.max(done + data.pages_pending, 1); bar.value = done;
      var embedding = $("#job-embedding");
      if (embedding) embedding.hidden = !data.embedding_progress;
      var err = $("#job-error");
      err.textContent = data.error || ""; err.hidden = !data.error;
      var list = $("#job-errors");
      if (data.recent_errors.length) {
        list.replaceChildren.apply(list, data.recent_errors.map(function (e) {
          var li = document.createElement("li");
          li.textContent = e.url + ": " + e.error + (e.http_status && e.error.indexOf("HTTP") < 0 ? " (HTTP " + e.http_status + ")" : "");
          return li;
        }));
      }
      if (data.finished && !data.embedding_progress) {  // searchable in full: nothing more to show
        clearInterval(timer);
        job.setAttribute("data-finished", "true");
        var cancel = $("#cancel-form"), again = $("#recrawl-form"), note = $("#cancel-note");
        if (cancel) cancel.hidden = true;
        if (again) again.hidden = false;
        if (note) note.hidden = true;
      }
    }
  }
})();

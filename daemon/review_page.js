// The reviewer's page (GET /review): lists the tenant's pending review
// cases with their attempts side by side, and approves (optionally with
// edited code) or rejects (with a comment) through /v1/reviews.
//
// Everything shown here comes from untrusted code, sandboxes and a model:
// the DOM is built with createElement and textContent only, never by
// having the browser parse text as markup (tests/integration/
// test_reviews.py checks that this script uses no such call). The
// page's Content-Security-Policy allows no inline script or style either.
// The key lives in sessionStorage only: gone when the tab closes.
"use strict";

(function () {
  var KEY = "ci-review-key";
  var $ = function (id) { return document.getElementById(id); };

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function status(text, bad) {
    var s = $("status");
    s.textContent = text;
    s.className = bad ? "bad" : "";
  }

  function key() {
    try { return sessionStorage.getItem(KEY) || ""; } catch (e) { return ""; }
  }

  function api(method, path, body) {
    var headers = { "Accept": "application/json" };
    var k = key();
    if (k) headers["Authorization"] = "Bearer " + k;
    var init = { method: method, headers: headers, credentials: "omit", cache: "no-store",
                 referrerPolicy: "no-referrer" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    return fetch(path, init).then(function (r) {
      return r.text().then(function (t) {
        var doc = null;
        try { doc = t ? JSON.parse(t) : null; } catch (e) { doc = null; }
        if (!r.ok) {
          var msg = doc && doc.error && typeof doc.error.message === "string"
            ? doc.error.message : ("HTTP " + r.status);
          var err = new Error(msg);
          err.status = r.status;
          throw err;
        }
        return doc;
      });
    });
  }

  function str(v) {
    if (v === undefined || v === null) return "";
    if (typeof v === "string") return v;
    try { return JSON.stringify(v, null, 2); } catch (e) { return String(v); }
  }

  function attemptView(a) {
    var box = el("section", "attempt");
    if (!a || typeof a !== "object") {
      box.appendChild(el("p", "muted", "(not an attempt)"));
      return box;
    }
    var head = "Attempt " + str(a.n);
    if (a.source) head += " \u00b7 " + str(a.source);
    if (a.status) head += " \u00b7 " + str(a.status);
    if (typeof a.duration_ms === "number") head += " \u00b7 " + a.duration_ms + " ms";
    box.appendChild(el("h3", null, head));
    var code = el("pre", "code");
    code.textContent = str(a.code);
    box.appendChild(code);
    var e = a.error;
    if (e && typeof e === "object") {
      box.appendChild(el("p", "error", str(e.ename) + (e.evalue !== undefined ? ": " + str(e.evalue) : "")));
      if (e.traceback !== undefined) {
        var tb = el("pre", "traceback");
        tb.textContent = Array.isArray(e.traceback) ? e.traceback.map(str).join("\n") : str(e.traceback);
        box.appendChild(tb);
      }
    } else if (e !== undefined && e !== null) {
      box.appendChild(el("p", "error", str(e)));
    }
    return box;
  }

  function caseView(r) {
    var c = (r && r["case"] && typeof r["case"] === "object") ? r["case"] : {};
    var attempts = Array.isArray(c.attempts) ? c.attempts : [];
    var art = el("article", "case");
    art.setAttribute("data-review-id", str(r.id));
    art.appendChild(el("h2", null, "Review " + str(r.id)));
    var meta = el("p", "meta");
    meta.textContent = "run " + str(r.run) + " \u00b7 queued " + str(r.created_at) +
      " \u00b7 " + attempts.length + " attempt" + (attempts.length === 1 ? "" : "s");
    art.appendChild(meta);
    if (c.goal !== undefined && c.goal !== null) art.appendChild(el("p", "goal", "Goal: " + str(c.goal)));

    var row = el("div", "attempts");
    attempts.forEach(function (a) { row.appendChild(attemptView(a)); });
    if (attempts.length === 0) row.appendChild(el("p", "muted", "(no attempts recorded)"));
    art.appendChild(row);

    var last = attempts.length ? str(attempts[attempts.length - 1].code) : "";
    var form = el("div", "decide");
    var lab = el("label", null, "Code to run on approval");
    var ta = el("textarea", "edit");
    ta.value = last;
    ta.spellcheck = false;
    ta.setAttribute("aria-label", "code to approve");
    lab.appendChild(ta);
    form.appendChild(lab);
    var clab = el("label", null, "Comment");
    var comment = el("input", "comment");
    comment.type = "text";
    comment.setAttribute("aria-label", "comment");
    clab.appendChild(comment);
    form.appendChild(clab);
    var approve = el("button", "approve", "Approve");
    approve.type = "button";
    var reject = el("button", "reject", "Reject");
    reject.type = "button";
    var out = el("p", "outcome");
    form.appendChild(approve);
    form.appendChild(reject);
    form.appendChild(out);
    art.appendChild(form);

    function done(what) {
      return function (doc) {
        out.textContent = what + " (" + str(doc && doc.state) + ")";
        out.className = "outcome ok";
        approve.disabled = reject.disabled = true;
        art.classList.add("decided");
      };
    }
    function failed(e) {
      out.textContent = "Failed: " + e.message;
      out.className = "outcome bad";
      approve.disabled = reject.disabled = false;
    }
    var path = "/v1/reviews/" + encodeURIComponent(str(r.id));
    approve.addEventListener("click", function () {
      var body = {};
      if (ta.value !== last) body.code = ta.value;
      if (comment.value) body.comment = comment.value;
      approve.disabled = reject.disabled = true;
      api("POST", path + "/approve", body).then(done("Approved"), failed);
    });
    reject.addEventListener("click", function () {
      if (!comment.value.trim()) {
        out.textContent = "A rejection needs a comment.";
        out.className = "outcome bad";
        comment.focus();
        return;
      }
      approve.disabled = reject.disabled = true;
      api("POST", path + "/reject", { comment: comment.value }).then(done("Rejected"), failed);
    });
    return art;
  }

  function load() {
    var main = $("cases");
    status("Loading\u2026");
    api("GET", "/v1/reviews?state=pending").then(function (doc) {
      var list = doc && Array.isArray(doc.reviews) ? doc.reviews : [];
      while (main.firstChild) main.removeChild(main.firstChild);
      list.forEach(function (r) { main.appendChild(caseView(r)); });
      status(list.length + " pending case" + (list.length === 1 ? "" : "s"));
    }, function (e) {
      while (main.firstChild) main.removeChild(main.firstChild);
      status(e.status === 401 ? "The key was refused: paste a tenant's API key." : "Could not load: " + e.message, true);
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    $("keyform").addEventListener("submit", function (ev) {
      ev.preventDefault();
      try { sessionStorage.setItem(KEY, $("key").value.trim()); } catch (e) { /* private mode */ }
      $("key").value = "";
      load();
    });
    $("keyforget").addEventListener("click", function () {
      try { sessionStorage.removeItem(KEY); } catch (e) { /* nothing kept */ }
      load();
    });
    $("reload").addEventListener("click", load);
    load();
  });
})();

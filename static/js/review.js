// Review pages: keyboard shortcuts and the "hide failing" toggle.
// Everything here has a plain-link fallback; the pages work without it.
(function () {
  "use strict";
  document.documentElement.classList.add("js");

  function isTyping(event) {
    var t = event.target;
    return t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
  }

  function follow(rel) {
    var link = document.querySelector('a[rel="' + rel + '"]');
    if (link) { window.location.assign(link.href); }
  }

  function withFailing(href, hidden) {
    var url = new URL(href, window.location.href);
    if (hidden) { url.searchParams.set("failing", "hide"); } else { url.searchParams.delete("failing"); }
    return url.toString();
  }

  function toggleFailing() {
    var view = document.getElementById("group-view");
    var button = document.getElementById("toggle-failing");
    if (!view || !button) { return; }
    var hidden = view.classList.toggle("hide-failing");
    button.setAttribute("aria-pressed", hidden ? "true" : "false");
    button.href = withFailing(window.location.href, !hidden);
    history.replaceState(history.state, "", withFailing(window.location.href, hidden));
    document.querySelectorAll('a[rel="next"], a[rel="prev"]').forEach(function (a) {
      a.href = withFailing(a.href, hidden);
    });
  }

  function openInterdiff() {
    var form = document.getElementById("interdiff-form");
    if (!form) { return; }
    if (form.requestSubmit) { form.requestSubmit(); } else { form.submit(); }
  }

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey || isTyping(event)) { return; }
    switch (event.key) {
      case "j": follow("next"); break;
      case "k": follow("prev"); break;
      case "f": toggleFailing(); break;
      case "i": openInterdiff(); break;
      default: return;
    }
    event.preventDefault();
  });

  document.addEventListener("click", function (event) {
    var toggle = event.target.closest("#toggle-failing");
    if (toggle) {
      event.preventDefault();
      toggleFailing();
      return;
    }
    var control = event.target.closest("[data-details]");
    if (control) {
      var scope = document.querySelector(control.getAttribute("data-scope"));
      if (!scope) { return; }
      var open = control.getAttribute("data-details") === "open";
      scope.querySelectorAll("details").forEach(function (d) { d.open = open; });
    }
  });
})();

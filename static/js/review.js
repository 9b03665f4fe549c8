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
    if (!hidden) { addCapToggles(); }
    button.setAttribute("aria-pressed", hidden ? "true" : "false");
    button.href = withFailing(window.location.href, !hidden);
    history.replaceState(history.state, "", withFailing(window.location.href, hidden));
    // every link and form that carries the page's layout keeps "hide failing" in step
    document.querySelectorAll('a[rel="next"], a[rel="prev"], a[data-layout]').forEach(function (a) {
      a.href = withFailing(a.href, hidden);
    });
    document.querySelectorAll("form[data-layout]").forEach(function (form) {
      var input = form.querySelector('input[name="failing"]');
      if (hidden && !input) {
        input = document.createElement("input");
        input.type = "hidden";
        input.name = "failing";
        input.value = "hide";
        form.appendChild(input);
      } else if (!hidden && input) {
        input.remove();
      }
    });
  }

  function openInterdiff() {
    var form = document.getElementById("interdiff-form");
    if (!form) { return; }
    if (form.requestSubmit) { form.requestSubmit(); } else { form.submit(); }
  }

  // A search hit links to the group page at a hunk (#hunk-<trajectory>-<file>-<n>) or at a
  // transcript turn (#turn-<trajectory>-<n>): open it, loading the transcript from that turn
  // first; a hunk the page left out (past its line budget, or in a "same as" column) shows its column.
  function showHit(loaded) {
    var id = window.location.hash.slice(1);  // our ids are ASCII: nothing to decode
    var found = /^(turn|hunk)-(\d+)-/.exec(id);
    if (!found) { return; }
    var target = document.getElementById(id);
    if (!target && found[1] === "turn" && !loaded) {
      var panel = document.getElementById("transcript");
      var link = document.querySelector('#transcripts a[href$="/trajectories/' + found[2] + '/transcript/"]');
      if (panel && link && window.htmx) {
        var start = id.split("-")[2];
        htmx.ajax("GET", link.getAttribute("href") + "?start=" + start, {target: panel, swap: "innerHTML"})
          .then(function () { showHit(true); });
        return;
      }
    }
    target = target || document.getElementById("t-" + found[2]);
    if (!target) { return; }
    uncap(target.closest(".cap"));
    if (target.tagName === "DETAILS") { target.open = true; }
    target.classList.add("hit-target");
    target.scrollIntoView({block: "center"});
  }
  // Capped content (review.css: a file row's cells, a grader's rationale) gets "Show all"
  // where it overflows. All boxes are measured before any button is added: measuring after each
  // insertion would lay out the whole matrix once per cell.
  function uncap(box) {
    if (!box || box.classList.contains("uncapped")) { return; }
    box.classList.add("uncapped");
    var button = box.nextElementSibling;
    if (button && button.classList.contains("cap-toggle")) { label(button, true); }
  }

  function label(button, open) {
    button.textContent = open ? "Show less" : "Show all";
    button.setAttribute("aria-expanded", open ? "true" : "false");
  }

  // Boxes not laid out (a failing column under "hide failing") measure nothing: measured again when shown.
  function addCapToggles() {
    var boxes = Array.prototype.slice.call(document.querySelectorAll(".cap:not(.overflows)"));
    boxes.filter(function (box) { return box.scrollHeight > box.clientHeight + 1; }).forEach(function (box) {
      var button = document.createElement("button");
      button.type = "button";
      button.className = "cap-toggle";
      label(button, false);
      box.classList.add("overflows");
      box.after(button);
    });
  }
  addCapToggles();
  showHit(false);
  window.addEventListener("hashchange", function () { showHit(false); });

  // File names stick under the column heads (app.css): keep the heads' height in --matrix-head.
  var matrixView = document.getElementById("group-view");
  var matrixHeads = matrixView && matrixView.querySelector("tr.m-ids");
  if (matrixHeads) {
    var keepHeadHeight = function () {
      matrixView.style.setProperty("--matrix-head", matrixHeads.getBoundingClientRect().height + "px");
    };
    keepHeadHeight();
    if (window.ResizeObserver) { new ResizeObserver(keepHeadHeight).observe(matrixHeads); }
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
    var capToggle = event.target.closest(".cap-toggle");
    if (capToggle) {
      var box = capToggle.previousElementSibling;
      label(capToggle, box.classList.toggle("uncapped"));
      return;
    }
    // opening a hunk or loading the rest of a file inside a capped cell means: show me all of it
    var opener = event.target.closest(".cap summary, .cap .more a");
    if (opener) { uncap(opener.closest(".cap")); }
    var control = event.target.closest("[data-details]");
    if (control) {
      var scope = document.querySelector(control.getAttribute("data-scope"));
      if (!scope) { return; }
      var open = control.getAttribute("data-details") === "open";
      scope.querySelectorAll("details").forEach(function (d) { d.open = open; });
    }
  });
})();

// The charts' numbers (webapp/runs/charts.py, webapp/audit/charts.py) in a tooltip that shows at
// once on hover, on a tap and on keyboard focus: the native <title> tooltip is slow, shows nothing
// on touch and nothing to the keyboard. A tap on a linked step shows its numbers first; a second
// tap follows the link. The arrow keys move along a chart's steps, one tab stop per chart.
// Also marks a sideways-scrolling table whose hidden columns lie to the right (.scroll-cue).
(function () {
  "use strict";
  var TARGETS = ".run-column, .run-dot, .chart-bar, .chart-point";
  var tip = null, shownFor = null, armed = false, touched = false;

  function target(node) {
    var el = node && node.closest ? node.closest(TARGETS + ", svg a") : null;
    if (el && el.tagName.toLowerCase() === "a") { el = el.querySelector(TARGETS); }
    return el;
  }

  // The text moves from <title> (no tooltip of its own any more) to data-tip and the name read out.
  function text(el) {
    var title = el.querySelector(":scope > title");
    if (title) {
      el.setAttribute("data-tip", title.textContent);
      (el.parentNode.tagName.toLowerCase() === "a" ? el.parentNode : el).setAttribute("aria-label", title.textContent);
      title.remove();
    }
    return el.getAttribute("data-tip") || "";
  }

  function show(el) {
    if (!tip) {
      tip = document.createElement("div");
      tip.className = "chart-tip";
      tip.id = "chart-tip";
      tip.setAttribute("role", "tooltip");
      document.body.appendChild(tip);
    }
    if (shownFor) { shownFor.classList.remove("is-tipped"); }
    shownFor = el;
    el.classList.add("is-tipped");
    tip.textContent = text(el);
    tip.hidden = false;
    var box = el.getBoundingClientRect(), room = document.documentElement.clientWidth;
    var left = Math.min(Math.max(box.left + box.width / 2 - tip.offsetWidth / 2, 4), room - tip.offsetWidth - 4);
    var top = box.top - tip.offsetHeight - 8;
    tip.style.left = left + "px";
    tip.style.top = (top < 4 ? box.bottom + 8 : top) + "px";
  }

  function hide() {
    if (tip) { tip.hidden = true; }
    if (shownFor) { shownFor.classList.remove("is-tipped"); }
    shownFor = null;
  }

  document.addEventListener("pointerover", function (event) {
    var el = target(event.target);
    if (el && event.pointerType !== "touch") { show(el); }
  });
  document.addEventListener("pointerout", function (event) {
    var el = target(event.target);
    if (el && event.pointerType !== "touch" && !el.contains(event.relatedTarget) && el === shownFor) { hide(); }
  });
  document.addEventListener("pointerdown", function (event) {
    touched = event.pointerType === "touch";
    var el = target(event.target);
    if (!touched) { return; }
    armed = el !== null && el === shownFor;  // its numbers are showing: this tap follows the link
    if (el) { show(el); } else { hide(); }
  });
  document.addEventListener("click", function (event) {
    if (touched && !armed && target(event.target)) { event.preventDefault(); }
  }, true);
  document.addEventListener("focusin", function (event) {
    var el = target(event.target);
    if (el) { show(el); }
  });
  document.addEventListener("focusout", function (event) {
    if (target(event.target) === shownFor) { hide(); }
  });
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape") { hide(); return; }
    var el = target(event.target);
    if (!el || !el.classList.contains("run-column") || (event.key !== "ArrowRight" && event.key !== "ArrowLeft")) {
      return;
    }
    var columns = Array.prototype.slice.call(el.closest("svg").querySelectorAll(".run-column"));
    var next = columns[columns.indexOf(el) + (event.key === "ArrowRight" ? 1 : -1)];
    if (!next) { return; }
    var from = el.parentNode.tagName.toLowerCase() === "a" ? el.parentNode : el;
    var to = next.parentNode.tagName.toLowerCase() === "a" ? next.parentNode : next;
    from.setAttribute("tabindex", "-1");
    to.setAttribute("tabindex", "0");
    to.focus();
    event.preventDefault();
  });

  function cue(wrap) {
    var more = wrap.scrollLeft + wrap.clientWidth < wrap.scrollWidth - 1;
    wrap.parentNode.classList.toggle("has-more", more);
  }
  function cues() {
    document.querySelectorAll(".scroll-cue > .scroll-cue-body").forEach(function (wrap) {
      cue(wrap);
      if (!wrap.dataset.cued) {
        wrap.dataset.cued = "1";
        wrap.addEventListener("scroll", function () { cue(wrap); }, { passive: true });
      }
    });
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", cues); } else { cues(); }
  window.addEventListener("resize", cues);
})();

// The auditor's page: 1/2/3 choose the verdict, s saves it, n and p move through the set.
(function () {
  "use strict";
  var form = document.getElementById("verdict-form");
  if (!form) { return; }

  function isTyping(target) {
    if (target.closest("#ranking-form")) { return true; }  // the ranking editor has keys of its own
    if (target.isContentEditable || target.tagName === "TEXTAREA" || target.tagName === "SELECT") { return true; }
    return target.tagName === "INPUT" && !["radio", "checkbox", "button", "submit"].includes(target.type);
  }

  function follow(id) {
    var link = document.getElementById(id);
    if (link && link.href) { window.location.assign(link.href); }
  }

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey || isTyping(event.target)) { return; }
    var choices = form.querySelectorAll('input[name="verdict"]');
    switch (event.key) {
      case "1": case "2": case "3":
        choices[Number(event.key) - 1].checked = true;
        choices[Number(event.key) - 1].focus();
        break;
      case "s": form.requestSubmit(); break;
      case "n": follow("audit-next"); break;
      case "p": follow("audit-prev"); break;
      default: return;
    }
    event.preventDefault();
  });
})();

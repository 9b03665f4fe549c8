// The ranking editor of the group page: drag and drop (SortableJS) and keys.
// The page is the state: #rk-list holds the ranked rows in order (a row with
// the class "tied" shares the rank of the row above), #rk-pool the unranked
// ones, #rk-out those that do not pass (by the tests, or marked not passing:
// ticking a row's override moves it between #rk-out and the pool, and the
// fields of a row in #rk-out are disabled, so it is never sent as ranked).
// After each change the hidden "tiers" input and the rank numbers (the
// form without JavaScript) are brought in step and the advantage preview is
// asked for. Saving stays a plain form POST.
(function () {
  "use strict";
  var form = document.getElementById("ranking-form");
  if (!form) { return; }
  var list = document.getElementById("rk-list");
  var pool = document.getElementById("rk-pool");
  var out = document.getElementById("rk-out");
  var tiersInput = document.getElementById("rk-tiers");
  var status = document.getElementById("rk-status");
  var save = document.getElementById("rk-save");
  var preview = document.getElementById("rk-preview");
  var dirty = false;
  var snapshot = null;

  function rows(container) {
    return Array.prototype.filter.call(container.children, function (el) { return el.classList.contains("rk-item"); });
  }

  function rowOf(tid) {
    return rows(list).concat(rows(pool)).filter(function (el) { return el.dataset.tid === tid; })[0];
  }

  function readTiers() {
    var tiers = [];
    rows(list).forEach(function (row, i) {
      if (i > 0 && row.classList.contains("tied")) { tiers[tiers.length - 1].push(row.dataset.tid); }
      else { tiers.push([row.dataset.tid]); }
    });
    return tiers;
  }

  function locate(tiers, tid) {
    for (var i = 0; i < tiers.length; i++) {
      var j = tiers[i].indexOf(tid);
      if (j >= 0) { return [i, j]; }
    }
    return null;
  }

  // Lay the rows out as `tiers` says; rows in no tier go to the pool.
  function render(tiers) {
    var placed = {};
    tiers.forEach(function (tier) {
      tier.forEach(function (tid, j) {
        var row = rowOf(tid);
        if (!row) { return; }
        row.classList.toggle("tied", j > 0);
        list.appendChild(row);
        placed[tid] = true;
      });
    });
    rows(list).forEach(function (row) {
      if (!placed[row.dataset.tid]) { row.classList.remove("tied"); pool.appendChild(row); }
    });
  }

  // Each takes the tiers, where the row sits ([tier, place]) and its id, and changes the tiers.
  var ops = {
    up: function (tiers, at, tid) {
      var i = at[0];
      if (tiers[i].length > 1) { tiers[i].splice(at[1], 1); tiers.splice(i, 0, [tid]); }
      else if (i > 0) { tiers.splice(i - 1, 2, tiers[i], tiers[i - 1]); }
    },
    down: function (tiers, at, tid) {
      var i = at[0];
      if (tiers[i].length > 1) { tiers[i].splice(at[1], 1); tiers.splice(i + 1, 0, [tid]); }
      else if (i < tiers.length - 1) { tiers.splice(i, 2, tiers[i + 1], tiers[i]); }
    },
    tie: function (tiers, at) {
      var i = at[0];
      if (at[1] > 0 || i === 0) { return; }
      tiers[i - 1].push(tiers[i].shift());
      if (!tiers[i].length) { tiers.splice(i, 1); }
    },
    untie: function (tiers, at) {
      var i = at[0];
      if (tiers[i].length > 1) { tiers.splice(i + 1, 0, tiers[i].splice(at[1], 1)); }
    },
    remove: function (tiers, at) {
      tiers[at[0]].splice(at[1], 1);
      if (!tiers[at[0]].length) { tiers.splice(at[0], 1); }
    }
  };

  function toggleNotes(row) {
    var notes = row.querySelector("details");
    notes.open = !notes.open;
    if (notes.open) { notes.querySelector("textarea").focus(); }
  }

  function apply(op, row) {
    if (op === "notes") { toggleNotes(row); return; }
    if (op === "fail") { markNotPassing(row); return; }
    if (row.parentElement === out) { return; }
    var tid = row.dataset.tid;
    var tiers = readTiers();
    var at = locate(tiers, tid);
    if (op === "add") {
      if (at) { return; }
      tiers.push([tid]);
    } else {
      if (!at) { return; }
      ops[op](tiers, at, tid);
    }
    render(tiers);
    changed();
    row.focus();
  }

  function competitionRanks(tiers) {
    var ranks = {}, position = 1;
    tiers.forEach(function (tier) {
      tier.forEach(function (tid) { ranks[tid] = position; });
      position += tier.length;
    });
    return ranks;
  }

  function sync() {
    var first = rows(list)[0];
    if (first) { first.classList.remove("tied"); }
    var tiers = readTiers();
    var ranks = competitionRanks(tiers);
    tiersInput.value = JSON.stringify(tiers);
    rows(list).concat(rows(pool)).forEach(function (row) {
      var rank = ranks[row.dataset.tid];
      var next = row.nextElementSibling;
      row.querySelector(".rk-rank").textContent = rank ? String(rank) : "";
      row.querySelector(".rk-number").value = rank ? String(rank) : "";
      row.classList.toggle("tie-head", !!rank && !row.classList.contains("tied") && !!next && next.classList.contains("tied"));
      var badges = row.querySelector(".rk-flag-badges");
      badges.textContent = "";
      row.querySelectorAll(".rk-flagset input:checked").forEach(function (box) {
        var badge = document.createElement("span");
        badge.className = "badge flag";
        badge.textContent = box.value;
        badges.appendChild(badge);
      });
    });
    rows(out).forEach(function (row) {
      row.classList.remove("tied", "tie-head");
      row.querySelector(".rk-rank").textContent = "";
      row.querySelector(".rk-number").value = "";
    });
    rows(list).concat(rows(pool), rows(out)).forEach(function (row) {
      var gone = row.parentElement === out;
      row.querySelectorAll(".rk-number, .rk-flagset input, textarea.rationale").forEach(function (field) {
        field.disabled = gone;
      });
      var box = row.querySelector(".rk-override-box");
      row.classList.toggle("overridden", box.checked);
      row.querySelector(".rk-override-reason").required = box.checked;
    });
    var unranked = rows(pool).length;
    document.getElementById("rk-pool-count").textContent = String(unranked);
    document.getElementById("rk-list-empty").hidden = rows(list).length > 0;
    save.disabled = unranked > 0 || !tiers.length;
    if (unranked) { status.textContent = "Rank every passing trajectory to save (" + unranked + " unranked)."; }
    else { status.textContent = dirty ? "Unsaved changes." : ""; }
    form.classList.toggle("dirty", dirty);
  }

  function changed() {
    dirty = true;
    sync();
    if (window.htmx && preview) { window.htmx.trigger(preview, "ranking-change"); }
  }

  function move(row, step) {
    var all = rows(list).concat(rows(pool));
    var target = all[all.indexOf(row) + step];
    if (target) { target.focus(); }
  }

  function toggleFlag(row, n) {
    var box = row.querySelectorAll(".rk-flagset input")[n - 1];
    if (!box) { return; }
    box.checked = !box.checked;
    changed();
  }

  form.addEventListener("keydown", function (event) {
    var row = event.target;
    if (!row.classList || !row.classList.contains("rk-item")) { return; }
    var key = event.key;
    var ranked = row.parentElement === list;
    if (event.altKey && (key === "ArrowUp" || key === "ArrowDown")) {
      if (ranked) { apply(key === "ArrowUp" ? "up" : "down", row); }
    } else if (event.altKey || event.ctrlKey || event.metaKey) {
      return;
    } else if (key === "ArrowUp" || key === "ArrowDown") {
      move(row, key === "ArrowUp" ? -1 : 1);
    } else if (key === "t" && ranked) {
      apply("tie", row);
    } else if (key === "u" && ranked) {
      apply("untie", row);
    } else if (/^[1-9]$/.test(key)) {
      toggleFlag(row, Number(key));
    } else if (key === "Enter") {
      if (ranked) { toggleNotes(row); } else { apply("add", row); }
    } else if ((key === "Delete" || key === "Backspace") && ranked) {
      apply("remove", row);
    } else if ((key === "j" || key === "k") && dirty) {
      status.textContent = "Unsaved changes: save or reload before leaving this group.";
    } else {
      return;
    }
    event.preventDefault();
  });

  form.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-op]");
    if (button) {
      event.preventDefault();
      apply(button.getAttribute("data-op"), button.closest(".rk-item"));
      return;
    }
    var tool = event.target.closest("button[data-rk]");
    if (tool) {
      event.preventDefault();
      var which = tool.getAttribute("data-rk");
      if (which === "all") {
        render(readTiers().concat(rows(pool).map(function (el) { return [el.dataset.tid]; })));
      } else {
        render(which === "clear" ? [] : JSON.parse(form.getAttribute(which === "grader" ? "data-grader" : "data-start")));
      }
      changed();
    }
  });

  // A row whose verdict is turned around leaves the ranking (marked not passing) or joins the pool.
  function overrideChanged(row) {
    var passes = (row.dataset.tested === "pass") !== row.querySelector(".rk-override-box").checked;
    if (passes) {
      pool.appendChild(row);
    } else {
      var tiers = readTiers(), at = locate(tiers, row.dataset.tid);
      if (at) { ops.remove(tiers, at); }
      out.appendChild(row);
      render(tiers);
    }
    changed();
    if (row.querySelector(".rk-override-box").checked) { row.querySelector(".rk-override-reason").focus(); }
  }

  // The row button for what the box under the notes does, offered on every passing row (an
  // unranked one has no notes to open): the notes open at the reason the override requires.
  function markNotPassing(row) {
    var box = row.querySelector(".rk-override-box");
    box.checked = row.dataset.tested === "pass";
    row.querySelector("details").open = true;
    overrideChanged(row);
  }

  form.addEventListener("change", function (event) {
    if (event.target.matches(".rk-flagset input")) { changed(); }
    else if (event.target.matches(".rk-override-box")) { overrideChanged(event.target.closest(".rk-item")); }
  });
  form.addEventListener("input", function (event) {
    if (event.target.matches("textarea")) { dirty = true; sync(); }
    else if (event.target.matches(".rk-override-reason")) { dirty = true; sync(); }
  });
  form.addEventListener("submit", function () { dirty = false; });

  function prevRow(row) {
    var el = row.previousElementSibling;
    while (el && !el.classList.contains("rk-item")) { el = el.previousElementSibling; }
    return el;
  }

  function nextRow(row) {
    var el = row.nextElementSibling;
    while (el && !el.classList.contains("rk-item")) { el = el.nextElementSibling; }
    return el;
  }

  // A row dropped between two rows of one tier joins it; anywhere else it is a tier of its own.
  function dropped(event) {
    var row = event.item;
    var tid = row.dataset.tid;
    var tiers = snapshot.map(function (tier) { return tier.filter(function (x) { return x !== tid; }); })
      .filter(function (tier) { return tier.length; });
    if (event.to === list) {
      var prev = prevRow(row), next = nextRow(row);
      var p = prev && locate(tiers, prev.dataset.tid), n = next && locate(tiers, next.dataset.tid);
      if (p && n && p[0] === n[0]) { tiers[p[0]].splice(p[1] + 1, 0, tid); }
      else { tiers.splice(p ? p[0] + 1 : 0, 0, [tid]); }
    }
    render(tiers);
    changed();
  }

  if (window.Sortable) {
    var options = {
      group: "ranking", handle: ".rk-grip", draggable: ".rk-item", animation: 120, forceFallback: true,
      ghostClass: "rk-ghost", chosenClass: "rk-chosen", dragClass: "rk-drag",
      onStart: function () { snapshot = readTiers(); },
      onEnd: dropped
    };
    window.Sortable.create(list, options);
    window.Sortable.create(pool, options);
  }
  sync();
})();

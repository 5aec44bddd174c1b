/* Keyboard-first review, no framework.
 *
 * One keydown listener on the document: it looks the buttons up at key time, so it keeps
 * working after every htmx swap. Shortcuts are declared in the HTML (data-shortcut="a" on the
 * button that shows <kbd>a</kbd>), so what the screen says and what the key does can't drift.
 *
 * - The card (#review-panel[data-shortcuts]): 1-9 pick a group, a confirm, x false match,
 *   n none of these, space skip, u undo the latest verdict, r search groups to reassign,
 *   f flag the card for the admins (the comment box: type, Enter sends; Shift+Tab reaches the
 *   kind, where Enter sends too), ? the list of shortcuts (a <dialog>; Esc closes it).
 *   A key the card declares unavailable (data-unavailable-keys) shows why, not nothing.
 * - A verdict whose request got no answer (network error) or a 502/503/504 is sent again,
 *   the same form with the same idempotency key, a few times; the card stays until the server
 *   has stored it, and says so when it could not.
 * - A type-ahead ([data-typeahead], results in data-results): ArrowUp/ArrowDown choose,
 *   Enter picks, Escape leaves the box.
 * - Batch review ([data-batch]): arrows or j/k move between tiles, x or space toggles
 *   "false match", Enter confirms the rest.
 * - A page brought back by Back or Forward from the browser's back/forward cache is reloaded.
 */
(function () {
  "use strict";

  // Inputs that take no typing: keys pressed on them are still shortcuts.
  var NOT_TYPING = ["checkbox", "radio", "button", "submit", "reset", "hidden", "range", "color", "file"];
  var retrying = null;  // a verdict form waiting to be sent again (see "verdicts sent again")

  function isTyping(element) {
    if (!element || !element.tagName) return false;
    if (element.isContentEditable) return true;
    var tag = element.tagName;
    if (tag === "TEXTAREA" || tag === "SELECT") return true;
    if (tag !== "INPUT") return false;
    return NOT_TYPING.indexOf((element.getAttribute("type") || "text").toLowerCase()) < 0;
  }

  // A verdict is on its way (or waiting to be sent again): a second key would land on a card
  // that is being replaced, or judge it twice.
  function busy() {
    return retrying !== null || document.querySelector("form.htmx-request") !== null;
  }

  function keyName(event) {
    if (event.key === " " || event.key === "Spacebar") return "space";
    return event.key.length === 1 ? event.key.toLowerCase() : event.key;
  }

  // --- type-ahead -------------------------------------------------------------------------

  function resultButtons(input) {
    var box = input.dataset.results ? document.querySelector(input.dataset.results) : null;
    return box ? Array.prototype.slice.call(box.querySelectorAll("[data-result]")) : [];
  }

  function highlight(buttons, index) {
    buttons.forEach(function (button, i) {
      var on = i === index;
      button.classList.toggle("active", on);
      if (on) {
        button.setAttribute("aria-current", "true");
        button.scrollIntoView({ block: "nearest" });
      } else {
        button.removeAttribute("aria-current");
      }
    });
  }

  function onTypeaheadKey(event, input) {
    var buttons = resultButtons(input);
    var active = buttons.findIndex(function (b) { return b.classList.contains("active"); });
    switch (event.key) {
      case "ArrowDown":
        event.preventDefault();
        if (buttons.length) highlight(buttons, Math.min(active + 1, buttons.length - 1));
        return;
      case "ArrowUp":
        event.preventDefault();
        if (buttons.length) highlight(buttons, Math.max(active - 1, 0));
        return;
      case "Enter":
        event.preventDefault();
        var chosen = buttons[active >= 0 ? active : 0];
        if (!chosen || busy()) return;
        // Results swapped in a moment ago may not be wired up by htmx yet (it does so once
        // they settle): unwired, the pick would post as a plain form and reload the page.
        if (window.htmx) window.htmx.process(chosen.closest("form") || chosen);
        chosen.click();
        return;
      case "Escape":
        event.preventDefault();
        highlight(buttons, -1);
        input.blur();
        return;
    }
  }

  // --- the card ---------------------------------------------------------------------------

  function openShortcuts() {
    var help = document.getElementById("shortcuts-help");
    if (help && !help.open) help.showModal();
  }

  function onCardKey(event, panel) {
    var key = keyName(event);
    if (key === "?") {
      event.preventDefault();
      openShortcuts();
      return;
    }
    if (key === "f") {
      // The comment, not the kind list: what a curator types next is the reason, and typed into
      // a list it was lost (the list took the letters, and Enter on it sent nothing).
      var comment = panel.querySelector("[data-flag-comment]");
      if (comment) {
        event.preventDefault();
        comment.focus();
      }
      return;
    }
    if (key === "r") {
      var search = panel.querySelector("[data-typeahead]");
      if (search) {
        event.preventDefault();
        search.focus();
        search.select();
      }
      return;
    }
    var button = panel.querySelector('[data-shortcut="' + CSS.escape(key) + '"]');
    if (!button) {
      unavailable(panel, key);
      return;
    }
    event.preventDefault();
    if (!busy()) button.click();
  }

  // A key this card has no use for right now (a and x once its group is marked a false match):
  // say so and what to press instead, rather than swallow it.
  function unavailable(panel, key) {
    var card = panel.querySelector("[data-unavailable-keys]");
    if (!card || card.dataset.unavailableKeys.split(" ").indexOf(key) < 0) return;
    var hint = card.querySelector("[data-key-hint]");
    if (!hint) return;
    hint.hidden = true;  // shown afresh, so a screen reader announces it again
    window.setTimeout(function () { hint.hidden = false; }, 0);
  }

  // --- batch review -----------------------------------------------------------------------

  function tiles(panel) {
    return Array.prototype.slice.call(panel.querySelectorAll("[data-tile]"));
  }

  // How many tiles sit on the first row of the grid: ArrowUp/ArrowDown move by that much.
  function columns(boxes) {
    var top = boxes[0].closest(".tile").offsetTop;
    var n = 0;
    while (n < boxes.length && boxes[n].closest(".tile").offsetTop === top) n++;
    return Math.max(n, 1);
  }

  function currentTile(panel, boxes) {
    var index = boxes.indexOf(document.activeElement);
    if (index >= 0) return index;
    var remembered = parseInt(panel.dataset.current || "0", 10);
    return Math.min(Math.max(remembered, 0), boxes.length - 1);
  }

  function focusTile(panel, boxes, index) {
    var i = Math.min(Math.max(index, 0), boxes.length - 1);
    panel.dataset.current = String(i);
    boxes[i].focus();
  }

  function summarize(panel) {
    var summary = panel.querySelector("[data-batch-summary]");
    if (!summary) return;
    var boxes = tiles(panel);
    var rejected = boxes.filter(function (b) { return b.checked; }).length;
    summary.textContent = (boxes.length - rejected) + " to confirm · " + rejected + " false match" +
      (rejected === 1 ? "" : "es");
  }

  function onBatchKey(event, panel) {
    var boxes = tiles(panel);
    if (!boxes.length) return;
    var index = currentTile(panel, boxes);
    var key = keyName(event);
    var step = { ArrowRight: 1, j: 1, ArrowLeft: -1, k: -1 }[key];
    if (key === "ArrowDown") step = columns(boxes);
    if (key === "ArrowUp") step = -columns(boxes);
    if (step) {
      event.preventDefault();
      var from = boxes.indexOf(document.activeElement) >= 0 ? index : index - step;
      focusTile(panel, boxes, from + step);
      return;
    }
    if (key === "x" || key === "space") {
      // Handled here for both keys, so a focused checkbox doesn't toggle a second time.
      event.preventDefault();
      focusTile(panel, boxes, index);
      boxes[index].click();
      return;
    }
    if (key === "Enter") {
      event.preventDefault();
      var form = panel.querySelector("form");
      // A batch swapped in (or loaded) a moment ago may not be wired up by htmx yet: unwired,
      // the form would post as a plain page and the "just done" notice and its undo be lost.
      if (form && window.htmx) window.htmx.process(form);
      if (form && !busy()) form.requestSubmit();
    }
  }

  // --- wiring -----------------------------------------------------------------------------

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) return;
    // The shortcuts list is open: keys are its own (Esc closes it, natively).
    if (document.querySelector("dialog[open]")) return;
    var target = event.target;
    if (target && target.matches && target.matches("[data-typeahead]")) {
      onTypeaheadKey(event, target);
      return;
    }
    if (isTyping(target)) {
      if (event.key === "Escape") target.blur();
      // Enter on the flag's kind list sends the flag, as it does from the comment box.
      if (event.key === "Enter" && target.matches("[data-flag]") && target.form) {
        event.preventDefault();
        target.form.requestSubmit();
      }
      return;
    }
    // Enter or space on a focused link or button presses that one, as everywhere else.
    var key = keyName(event);
    if ((key === "Enter" || key === "space") && target.closest && target.closest("a, button")) {
      return;
    }
    var batch = document.querySelector("[data-batch]");
    if (batch) {
      onBatchKey(event, batch);
      return;
    }
    var panel = document.querySelector("[data-shortcuts]");
    if (panel) onCardKey(event, panel);
  });

  document.addEventListener("change", function (event) {
    var panel = event.target.closest && event.target.closest("[data-batch]");
    if (panel && event.target.matches("[data-tile]")) summarize(panel);
  });

  document.addEventListener("focusin", function (event) {
    var panel = event.target.closest && event.target.closest("[data-batch]");
    if (panel && event.target.matches("[data-tile]")) {
      panel.dataset.current = String(tiles(panel).indexOf(event.target));
    }
  });

  // A fresh batch (first load or swapped in after a submit): ready for the keyboard at once.
  function startBatch() {
    var panel = document.querySelector("[data-batch]");
    if (!panel) return;
    summarize(panel);
    var boxes = tiles(panel);
    if (boxes.length && !isTyping(document.activeElement)) focusTile(panel, boxes, 0);
  }

  // --- verdicts sent again ----------------------------------------------------------------

  // Waits before the 2nd, 3rd and 4th try. The form carries its idempotency key, so a verdict
  // the server stored before its answer was lost is replayed, not recorded twice.
  var RETRY_DELAYS_MS = [300, 1000, 2500];
  var RETRIABLE_STATUS = [0, 502, 503, 504];

  function verdictForm(element) {
    if (!element || !element.matches || !element.matches("form")) return null;
    if (!element.closest("[data-shortcuts]")) return null;
    return element.querySelector('input[name="idempotency_key"]') ? element : null;
  }

  function verdictFailed(form, why) {
    var tries = parseInt(form.dataset.tries || "1", 10);
    if (tries > RETRY_DELAYS_MS.length) {
      form.dataset.tries = "1";  // the curator's next press starts a fresh round
      retrying = null;
      showFailure("Your verdict could not be stored: " + why + ". The card stays: press the " +
        "key again to retry, or reload the page.", "failure");
      return;
    }
    retrying = form;
    showFailure(why + ": your verdict was not stored yet. Trying again (" + (tries + 1) +
      " of " + (RETRY_DELAYS_MS.length + 1) + ")…", "retrying");
    window.setTimeout(function () {
      retrying = null;
      if (!document.body.contains(form)) return;
      form.dataset.tries = String(tries + 1);
      form.requestSubmit();
    }, RETRY_DELAYS_MS[tries - 1]);
  }

  // A 5xx or a lost connection swaps nothing: say so in the panel rather than leave the
  // curator pressing keys at a card that silently stopped answering.
  function showFailure(message, state) {
    var panel = document.querySelector("[data-shortcuts], [data-batch], #conflicts-panel");
    if (!panel) return;
    var box = panel.querySelector("[data-failure]");
    if (!box) {
      box = document.createElement("p");
      box.className = "error";
      box.setAttribute("role", "alert");
      box.setAttribute("data-failure", "");
      box.setAttribute("data-testid", "error");
      panel.insertBefore(box, panel.firstChild);
    }
    box.textContent = message;
    box.setAttribute("data-state", state || "failure");
  }

  document.addEventListener("htmx:responseError", function (event) {
    var status = event.detail.xhr ? event.detail.xhr.status : "";
    var form = verdictForm(event.detail.elt);
    if (form && RETRIABLE_STATUS.indexOf(status) >= 0) {
      verdictFailed(form, "the server is unavailable (" + status + ")");
      return;
    }
    showFailure("The server failed (" + status + "). Reload the page to see where things stand.");
  });
  document.addEventListener("htmx:sendError", function (event) {
    var form = verdictForm(event.detail.elt);
    if (form) {
      verdictFailed(form, "the server could not be reached");
      return;
    }
    showFailure("The server could not be reached: that action was not sent. Try again.");
  });

  document.addEventListener("click", function (event) {
    if (event.target.closest && event.target.closest("[data-shortcuts-open]")) openShortcuts();
  });

  // A page the browser restored from its back/forward cache shows cards and counts as they were
  // when the curator left, judged ones included: load it afresh. (The pages are sent no-store
  // too, which keeps most browsers from keeping them at all.)
  window.addEventListener("pageshow", function (event) {
    if (event.persisted) window.location.reload();
  });

  document.addEventListener("DOMContentLoaded", startBatch);
  document.addEventListener("htmx:afterSettle", function (event) {
    // A new card replaced the one judged from its reassign box: htmx gives focus back to the
    // element of the same id, the new card's box, where the next shortcuts would be typed as
    // text. The curator is done typing: leave the box.
    // (The swap's target is the old panel, replaced whole: the new one is looked up.)
    var swapped = event.detail && event.detail.target;
    var panel = document.querySelector("[data-shortcuts]");
    var active = document.activeElement;
    if (swapped && swapped.id === "review-panel" && panel && panel.contains(active) &&
        active.matches("[data-typeahead]")) {
      active.blur();
    }
  });
  document.addEventListener("htmx:afterSettle", function () {
    // The swap removed the focused tile: focus is on <body> until the new batch takes it.
    var panel = document.querySelector("[data-batch]");
    if (panel && !panel.contains(document.activeElement)) startBatch();
  });
})();

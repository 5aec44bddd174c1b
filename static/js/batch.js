/* Batch review, besides the grid keys of review.js:
 * - "Accept all above p": while the curator sets p, the tiles it would confirm are highlighted
 *   and counted (marked false matches never are), so the click holds no surprise.
 * - u takes back the batch just submitted, as u undoes the last verdict on the card.
 */
(function () {
  "use strict";

  function typing(element) {
    return element && element.matches && element.matches("input[type=number], input[type=text], input[type=search], textarea, select");
  }

  function refresh(panel) {
    var box = panel.querySelector("[data-accept-min]");
    var summary = panel.querySelector("[data-accept-summary]");
    if (!box || !summary) return;
    var p = parseFloat(box.value);
    var valid = !isNaN(p) && p >= 0 && p <= 1;
    var tiles = panel.querySelectorAll("[data-probability]");
    var n = 0;
    tiles.forEach(function (tile) {
      var marked = tile.querySelector("[data-tile]").checked;
      var above = valid && !marked && parseFloat(tile.dataset.probability) >= p;
      tile.classList.toggle("tile-above", above);
      if (above) n++;
    });
    summary.textContent = valid
      ? n + " of " + tiles.length + " would be confirmed; the rest stay open"
      : "p is a probability from 0 to 1";
  }

  function refreshAll() {
    document.querySelectorAll("[data-batch]").forEach(refresh);
  }

  document.addEventListener("input", function (event) {
    var panel = event.target.closest && event.target.closest("[data-batch]");
    if (panel && event.target.matches("[data-accept-min]")) refresh(panel);
  });
  document.addEventListener("change", function (event) {
    var panel = event.target.closest && event.target.closest("[data-batch]");
    if (panel && event.target.matches("[data-tile]")) refresh(panel);
  });

  // Capture phase: seen before review.js, whose Enter would confirm the whole batch.
  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) return;
    var panel = document.querySelector("[data-batch]");
    if (!panel) return;
    var target = event.target;
    if (event.key === "Enter" && target.matches && target.matches("[data-accept-min]")) {
      event.preventDefault();
      panel.querySelector("[data-testid=accept-above]").click();
      return;
    }
    if (event.key === "u" && !typing(target)) {
      var undo = panel.querySelector("[data-batch-undo]");
      if (undo) {
        event.preventDefault();
        // A batch swapped in a moment ago may not be wired up by htmx yet: unwired, the undo
        // would post as a plain page (as Enter guards against in review.js).
        if (window.htmx) window.htmx.process(undo.form);
        undo.click();
      }
    }
  }, true);

  document.addEventListener("DOMContentLoaded", refreshAll);
  document.addEventListener("htmx:afterSettle", refreshAll);
})();

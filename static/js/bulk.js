/* The Bulk page: once a .csv is chosen, its header row is read in the browser (the first 64 KB)
 * and its columns are offered for the "column to normalize" field, so a curator picks one
 * rather than typing a name the file may not have. A name that is not among them is cleared.
 * Without JavaScript the field is typed and the server names the columns on a mistake.
 */
(function () {
  "use strict";

  // The first record's fields, as Python's csv reads them: a quote opens a field only as its
  // first character, and inside one two quotes are one. Null when the record does not end
  // within ``text`` (a header longer than what was read): its last field would be cut.
  function headerFields(text, whole) {
    var fields = [], field = "", quoted = false, start = true, ended = whole;
    for (var i = 0; i < text.length; i++) {
      var c = text[i];
      if (quoted) {
        if (c === '"' && text[i + 1] === '"') { field += '"'; i++; }
        else if (c === '"') quoted = false;
        else field += c;
      } else if (c === '"' && start) { quoted = true; start = false; }
      else if (c === ",") { fields.push(field); field = ""; start = true; }
      else if (c === "\n" || c === "\r") { ended = true; break; }
      else { field += c; start = false; }
    }
    if (!ended) return null;
    fields.push(field);
    return fields.map(function (name) { return name.trim(); }).filter(Boolean);
  }

  function offer(columns, input, list, hint, filename) {
    list.replaceChildren.apply(list, columns.map(function (name) {
      var option = document.createElement("option");
      option.value = name;
      return option;
    }));
    hint.hidden = !columns.length;
    hint.textContent = columns.length
      ? "Columns in " + filename + ": " + columns.map(function (name) { return "'" + name + "'"; }).join(", ")
      : "";
    if (columns.length && columns.indexOf(input.value.trim()) < 0) {
      input.value = columns.length === 1 ? columns[0] : "";
      input.placeholder = "one of its columns";
    }
  }

  var HEAD_BYTES = 65536;

  document.addEventListener("change", function (event) {
    var file = event.target;
    if (!file.matches || !file.matches("[data-bulk-file]")) return;
    var input = document.querySelector("[data-bulk-column]");
    var list = document.getElementById(input.getAttribute("list"));
    var hint = document.querySelector("[data-bulk-columns-hint]");
    var chosen = file.files[0];
    if (!chosen || !/\.csv$/i.test(chosen.name)) { offer([], input, list, hint, ""); return; }
    chosen.slice(0, HEAD_BYTES).text().then(function (text) {
      if (file.files[0] !== chosen) return;  // another file was picked while this one was read
      var columns = headerFields(text.replace(/^\ufeff/, ""), chosen.size <= HEAD_BYTES);
      // A header past what was read is left to the server, which names its columns.
      offer(columns || [], input, list, hint, chosen.name);
    }).catch(function () { offer([], input, list, hint, ""); });
  });
})();

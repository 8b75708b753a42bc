// registry serve's pages: the column descriptions folded away, the answer of "Resolve a run"
// as a list of what it says, and the AL-against-K picture of the rows a page shows.
(function (config) {
  "use strict";
  var each = function (nodes, fn) { Array.prototype.forEach.call(nodes, fn); };

  // A view of thirty columns lists thirty descriptions above its table: one click away, and
  // each column's header says its own when pointed at.
  var described = document.querySelector("dl.column-descriptions");
  if (described) {
    var fold = document.createElement("details");
    fold.className = "registry-columns";
    var summary = document.createElement("summary");
    summary.textContent = "What each of the " + described.querySelectorAll("dt").length +
      " columns means, with its unit";
    fold.appendChild(summary);
    described.parentNode.insertBefore(fold, described);
    fold.appendChild(described);
  }
  each(document.querySelectorAll("th[data-column-description]"), function (th) {
    th.title = th.getAttribute("data-column-description");
  });

  var wrapper = document.querySelector(".table-wrapper");
  var table = wrapper && wrapper.querySelector("table");

  // One answer row, read down rather than across: each column, its value and its meaning.
  if (config.answer && table && table.tBodies.length && table.tBodies[0].rows.length === 1) {
    var heads = table.tHead ? table.tHead.rows[0].cells : [];
    var cells = table.tBodies[0].rows[0].cells;
    var answer = document.createElement("table");
    answer.id = "registry-answer";
    answer.className = "registry-answer";
    each(heads, function (th, i) {
      var name = th.textContent.trim();
      var row = answer.insertRow();
      row.setAttribute("data-column", name);
      var key = document.createElement("th");
      key.scope = "row";
      key.textContent = name;
      row.appendChild(key);
      var value = row.insertCell();
      value.className = "value";
      value.textContent = cells[i] ? cells[i].textContent.trim() : "";
      var meaning = row.insertCell();
      meaning.className = "meaning";
      meaning.textContent = config.answer[name] || "";
    });
    wrapper.parentNode.insertBefore(answer, wrapper);
    wrapper.style.display = "none";  // the same row, across: still there for scripts
    var said = answer.querySelector("tr[data-column=answer] td.value");
    if (said) { said.style.color = said.textContent === "resolved" ? "#176117" : "#a8201a"; }
    var style = document.createElement("style");
    style.textContent = ".registry-answer { border-collapse: collapse; margin: 1em 0; }" +
      ".registry-answer th, .registry-answer td { text-align: left; vertical-align: top;" +
      " padding: 0.3em 0.8em; border-bottom: 1px solid #e4e4e4; }" +
      ".registry-answer td.value { font-weight: 600; word-break: break-word; max-width: 34em; }" +
      ".registry-answer td.meaning { color: #666; max-width: 40em; }" +
      ".registry-answer tr[data-column=answer] td.value { font-size: 1.3em; }";
    document.head.appendChild(style);
  }

  // The picture: the page's own .png link, so that it draws exactly the rows shown.
  var link = Array.prototype.find.call(document.querySelectorAll(".export-links a"),
    function (a) { return new URL(a.href, location.href).pathname.slice(-4) === ".png"; });
  var values = Array.prototype.some.call(document.querySelectorAll("td.col-acceptance_length"),
    function (td) { return td.textContent.trim() !== ""; });
  if (link && wrapper && values) {
    var figure = document.createElement("figure");
    figure.className = "registry-picture";
    figure.style.margin = "1em 0";
    var img = document.createElement("img");
    img.src = link.href;
    img.alt = "Acceptance length against K for the rows shown";
    img.style.maxWidth = "min(100%, 720px)";
    var caption = document.createElement("figcaption");
    caption.textContent = "AL against K for the rows shown, drawn as registry plot draws them.";
    caption.style.color = "#666";
    figure.appendChild(img);
    figure.appendChild(caption);
    var after = document.getElementById("registry-answer") || wrapper;
    after.parentNode.insertBefore(figure, after.nextSibling);
  }
})(window.registryPage || {});

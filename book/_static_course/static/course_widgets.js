/*
 * The course book's companion to the ipywidgets manager. book/_config.yml loads it on
 * every page that carries saved widgets (nb_ipywidgets_js), after require.js and before
 * the widget manager (@jupyter-widgets/html-manager's embed-amd.js). Three jobs:
 *
 * 1. require.js resolves the widget manager's module ids (@jupyter-widgets/base,
 *    @jupyter-widgets/controls, @jupyter-widgets/html-manager/dist/libembed-amd, ...)
 *    against the page's own folder, and each module finds its files next to its own
 *    address: the icon fonts were fetched from notebooks/@jupyter-widgets/..., three 404s
 *    in the console. The ids are mapped to _static/vendor/html-manager/.
 * 2. The widget manager typesets a widget's text with MathJax 2's API,
 *    MathJax.Hub.Queue(["Typeset", MathJax.Hub, node]), whenever window.MathJax exists.
 *    The book loads MathJax 3, which has no Hub: every HTML widget drawn on a page with
 *    formulas threw "Cannot read properties of undefined (reading 'Queue')". A Hub whose
 *    Queue typesets with MathJax 3 is added, to the configuration now and to MathJax 3
 *    once it has started.
 * 3. No Python runs behind the book: an ipywidget (the memory calculator of chapter 2 and
 *    the Dutch edition) shows what it computed when the page was built, and its inputs
 *    would change nothing. Each ipywidget with inputs gets them switched off and a note on
 *    it that says it is a snapshot and links to how to run the chapter. The bit explorer
 *    is not an ipywidget: its own JavaScript answers every click, here as in JupyterLab.
 */
(function () {
  "use strict";

  var root = document.documentElement.getAttribute("data-content_root") || "";

  // 1. require.js: where the widget manager's own files are.
  if (typeof window.requirejs === "function" && window.requirejs.config) {
    var manager = root + "_static/vendor/html-manager";
    window.requirejs.config({
      paths: {"@jupyter-widgets/html-manager/dist": manager, "@jupyter-widgets": manager}
    });
  }

  // 2. MathJax 2's Hub.Queue, answered by MathJax 3.
  var waiting = [];

  function typeset(node) {
    var mathjax = window.MathJax;
    if (!node || !mathjax || typeof mathjax.typesetPromise !== "function") {
      if (node) waiting.push(node);  // MathJax 3 has not started yet
      return;
    }
    var startup = mathjax.startup;
    var job = ((startup && startup.promise) || Promise.resolve()).then(function () {
      return mathjax.typesetPromise([node]);
    }).catch(function (error) {
      console.warn("course_widgets.js: MathJax could not typeset a widget:", error);
    });
    if (startup) startup.promise = job;  // MathJax 3's way to queue typesetting
  }

  var hub = {
    Queue: function () {
      for (var i = 0; i < arguments.length; i++) {
        var job = arguments[i];
        if (Array.isArray(job) && job[0] === "Typeset") typeset(job[2]);
      }
    }
  };

  var config = window.MathJax;
  if (config && !config.version) {  // MathJax 3's configuration; MathJax itself loads later
    config.Hub = hub;
    config.startup = config.startup || {};
    var ready = config.startup.ready;
    config.startup.ready = function () {
      if (typeof ready === "function") ready(); else window.MathJax.startup.defaultReady();
      window.MathJax.Hub = hub;
      waiting.splice(0).forEach(typeset);
    };
  } else if (config && !config.Hub) {
    config.Hub = hub;
  }

  // 3. Snapshots: an ipywidget with inputs, in a book with no kernel.
  var TEXTS = {
    en: {
      lead: "Snapshot.",
      body: "No Python runs in the book: what this widget shows was computed for the " +
        "inputs shown when the page was built, and its inputs are switched off here. " +
        "To try other values, run the chapter in JupyterLab or Colab: see ",
      link: "how to use the course",
      end: "."
    },
    nl: {
      lead: "Momentopname.",
      body: "In het boek draait geen Python: wat deze widget laat zien, is berekend voor " +
        "de getoonde invoer toen de pagina werd gebouwd, en de invoer staat hier uit. " +
        "Wil je andere waarden proberen, voer het hoofdstuk dan uit in JupyterLab of " +
        "Colab: zie ",
      link: "hoe je de cursus gebruikt",
      end: "."
    }
  };
  var CONTROLS = "input, select, textarea, button";

  function language(widget) {
    var own = /(?:^|\s)course-lang-([a-z]+)/.exec(widget.className);
    if (own && TEXTS[own[1]]) return own[1];
    var page = (window.DOCUMENTATION_OPTIONS && DOCUMENTATION_OPTIONS.pagename) ||
      window.location.pathname;
    var folder = /(?:^|\/)(?:notebooks\/)?([a-z]{2})\//.exec(page);
    if (folder && TEXTS[folder[1]]) return folder[1];
    var lang = (document.documentElement.lang || "en").slice(0, 2);
    return TEXTS[lang] ? lang : "en";
  }

  function howToRun() {
    var brand = document.querySelector("a.navbar-brand[href]");
    var landing = brand ? brand.getAttribute("href") : root + "intro.html";
    return landing.split("#")[0] + "#how-to-use-it";
  }

  function note(lang) {
    var words = TEXTS[lang];
    var box = document.createElement("div");
    box.className = "course-snapshot-note";
    box.setAttribute("role", "note");
    var lead = document.createElement("strong");
    lead.textContent = words.lead;
    var link = document.createElement("a");
    link.href = howToRun();
    link.textContent = words.link;
    box.append(lead, " " + words.body, link, words.end);
    return box;
  }

  function freeze(widget) {
    var controls = widget.querySelectorAll(CONTROLS);
    if (!controls.length) return;  // shows, takes no input: a progress bar, a label
    for (var i = 0; i < controls.length; i++) {
      if (!controls[i].closest(".course-snapshot-note")) controls[i].disabled = true;
    }
    if (!widget.classList.contains("course-snapshot")) {
      widget.classList.add("course-snapshot");
      widget.insertBefore(note(language(widget)), widget.firstChild);
    }
  }

  var queued = false;

  function freezeAll() {
    queued = false;
    var widgets = document.querySelectorAll(".widget-subarea > .jupyter-widgets");
    for (var i = 0; i < widgets.length; i++) freeze(widgets[i]);
  }

  function soon() {
    if (!queued) {
      queued = true;
      window.requestAnimationFrame(freezeAll);
    }
  }

  // The widget manager draws the widgets after the page has loaded, child by child.
  function watch() {
    new MutationObserver(soon).observe(document.body, {childList: true, subtree: true});
    soon();
  }

  if (document.body) watch(); else document.addEventListener("DOMContentLoaded", watch);
})();

// Offline support for the Jupyter widgets embedded in the book's pages.
(function () {
  // 1. The widget manager loads its icon fonts relative to the AMD modules it defines, which
  //    require.js would place next to the page. Map each module into the folder in _static that
  //    holds the fonts (the modules themselves are defined inline, never fetched).
  var here = document.currentScript.src.replace(/[^/]*$/, "") + "vendor/html-manager";
  var paths = { "@jupyter-widgets/html-manager/dist": here };
  ["html-manager", "base", "base7", "controls", "controls7", "output"].forEach(function (name) {
    paths["@jupyter-widgets/" + name] = here + "/" + name;
  });
  require.config({ paths: paths });

  // 2. ipywidgets 8 typesets widget labels with MathJax 2's MathJax.Hub.Queue, but the book loads
  //    MathJax 3, which has no Hub, so every label threw a TypeError. Give whichever MathJax object
  //    is current (the configuration, then MathJax 3 itself) a Hub.Queue that forwards to
  //    MathJax 3's typesetPromise.
  function withHub(mathjax) {
    if (mathjax && typeof mathjax === "object" && !mathjax.Hub) {
      Object.defineProperty(mathjax, "Hub", { enumerable: false, value: { Queue: function (job) {
        var element = job && job[2];
        if (element && window.MathJax && window.MathJax.typesetPromise) {
          window.MathJax.typesetPromise([element]);
        }
      } } });
    }
    return mathjax;
  }
  var current = withHub(window.MathJax);
  Object.defineProperty(window, "MathJax", {
    configurable: true,
    get: function () { return current; },
    set: function (value) { current = withHub(value); },
  });
})();

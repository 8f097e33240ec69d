(function () {
  var top;
  try {
    top = window.top;
    if (top === window || top.location.origin !== window.location.origin) { return; }
  } catch (e) { return; }
  // Airflow's UI shows this page in an iframe at /plugin/tokokita (the plugin's url_route)
  // and mirrors the page's own path below it: /plugin/tokokita/tokokita/... The address
  // stays the menu's, with the pipeline tab (the only state the page keeps in its URL), and a
  // reload of that address opens that tab again: the UI loads the page itself (its referrer
  // is then the UI's address), always the default tab.
  var ROUTE = "/plugin/tokokita";
  var PAGE = "/tokokita/";
  var at = top.location.pathname.indexOf(ROUTE);
  if (at >= 0) {
    var address = top.location.pathname.slice(0, at) + ROUTE;
    var own = new URLSearchParams(window.location.search).get("pipeline");
    var from = null;
    try { from = document.referrer ? new URL(document.referrer) : null; } catch (e) { from = null; }
    var byTheUi = from !== null && from.origin === window.location.origin &&
      (from.pathname === address || from.pathname === address + "/");
    var asked = byTheUi ? from.searchParams.get("pipeline") : null;
    if (window.location.pathname === PAGE && asked && asked !== own) {
      window.location.replace(PAGE + "?" + new URLSearchParams({pipeline: asked}).toString());
      return;
    }
    var wanted = address + (own ? "?" + new URLSearchParams({pipeline: own}).toString() : "");
    window.addEventListener("load", function () {
      // after the UI's own handler of this frame's load, which mirrors the page's path
      setTimeout(function () {
        if (top.location.pathname + top.location.search !== wanted) {
          top.history.replaceState(top.history.state, "", wanted);
        }
      }, 0);
    });
  }
  document.addEventListener("click", function (event) {
    var link = event.target.closest ? event.target.closest("a[target=_top]") : null;
    if (!link || event.defaultPrevented || event.button !== 0 || event.metaKey ||
        event.ctrlKey || event.shiftKey || event.altKey) { return; }
    var url = new URL(link.href, window.location.href);
    if (url.origin !== top.location.origin) { return; }
    event.preventDefault();
    var idx = (top.history.state && top.history.state.idx) || 0;
    var state = {usr: null, key: Math.random().toString(36).slice(2, 10), idx: idx + 1};
    top.history.pushState(state, "", url.pathname + url.search + url.hash);
    top.dispatchEvent(new top.PopStateEvent("popstate", {state: state}));
  });
})();

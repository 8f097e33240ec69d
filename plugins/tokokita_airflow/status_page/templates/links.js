(function () {
  var top;
  try {
    top = window.top;
    if (top === window || top.location.origin !== window.location.origin) { return; }
  } catch (e) { return; }
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

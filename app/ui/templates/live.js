(function () {
  var main = document.getElementById("live"), state = document.getElementById("live-state");
  var url = main && main.getAttribute("data-events");
  if (!url) { return; }
  if (!window.EventSource) {
    setTimeout(function () { location.reload(); }, {{ refresh_seconds * 1000 }});
    return;
  }
  var source = new EventSource(url);
  function show(text, on) { state.textContent = text; state.className = on ? "live on" : "live"; }
  source.onopen = function () { show("live", true); };
  source.onerror = function () { show("reconnecting…", false); };
  source.addEventListener("update", function (event) {
    main.innerHTML = event.data;  /* rendered and escaped by the server */
    show("live", true);
  });
  source.addEventListener("gone", function () { show("deleted", false); source.close(); });
})();

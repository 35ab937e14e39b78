// Reloads a list page when a hold arrives or leaves pending (GET /ui/events).
// Progressive enhancement: without it the page refreshes itself every 15 s.
(function () {
  if (!window.EventSource) { return; }
  var es = new EventSource('/ui/events');
  var pending = null;
  es.addEventListener('holds', function () {
    if (pending) { return; }
    pending = setTimeout(function () { window.location.reload(); }, 300);
  });
})();

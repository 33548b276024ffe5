// Holdline live session view (/sessions/{id}): the call's timeline, drawn
// by timeline.js as the session's events arrive over its event stream
// (GET /v1/sessions/{id}/events). The stream is read with fetch rather than
// EventSource: the token goes in a header, not the URL, and events of every
// kind arrive through one reader (EventSource dispatches by event name).
(() => {
  'use strict';

  const TOKEN_KEY = 'holdline.token'; // the web client's, kept for this tab
  const RETRY_MS = 2000;
  const MAX_RETRIES = 30; // about a minute of a server away, then give up

  const $ = (id) => document.getElementById(id);
  const id = decodeURIComponent(location.pathname.replace(/^\/sessions\//, '').replace(/\/.*$/, ''));
  const status = $('status');
  const tl = window.HoldlineTimeline.mount($('timeline'), [], { live: true });
  $('session-id').textContent = id;
  document.title = `Holdline session ${id}`;

  let lastSeq = 0;
  let ended = false;
  let retries = 0;

  function loadToken() {
    try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch (_) { return ''; }
  }
  function saveToken(t) {
    try { sessionStorage.setItem(TOKEN_KEY, t); } catch (_) { /* storage off */ }
  }

  function setStatus(text, tone) {
    status.textContent = text;
    document.body.dataset.state = tone || 'idle';
  }

  function askToken(message) {
    const form = $('token-field');
    form.hidden = false;
    setStatus(message, 'error');
    $('token').focus();
  }

  // read parses a Server-Sent Events body into the timeline.
  async function read(body) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let cut;
      while ((cut = buf.search(/\r?\n\r?\n/)) >= 0) {
        const block = buf.slice(0, cut);
        buf = buf.slice(cut).replace(/^\r?\n\r?\n/, '');
        dispatch(block);
      }
    }
  }

  function dispatch(block) {
    const data = block.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).replace(/^ /, '')).join('\n');
    if (!data) return; // a keep-alive comment
    let ev;
    try { ev = JSON.parse(data); } catch (_) { return; }
    if (typeof ev.seq === 'number' && ev.seq > lastSeq) lastSeq = ev.seq;
    tl.add(ev);
    if (ev.kind === 'session_ended') ended = true;
  }

  async function watch() {
    while (!ended) {
      const headers = {};
      const token = ($('token').value || loadToken()).trim();
      if (token) headers.Authorization = `Bearer ${token}`;
      if (lastSeq) headers['Last-Event-ID'] = String(lastSeq);
      let res;
      try {
        res = await fetch(`/v1/sessions/${encodeURIComponent(id)}/events`, { headers, cache: 'no-store' });
      } catch (_) {
        res = null;
      }
      if (res && res.status === 401) {
        askToken((await res.text()).trim() || 'This server wants an access token.');
        return;
      }
      if (res && res.status === 404) {
        setStatus(lastSeq ? 'The session is over.' : `No session ${id} on this server (it may have ended).`, 'ended');
        return;
      }
      if (res && res.ok && res.body) {
        retries = 0;
        setStatus('Live: events arrive as the call goes on.', 'connected');
        try { await read(res.body); } catch (_) { /* the stream broke: try again */ }
        if (ended) break;
      }
      retries++;
      if (retries > MAX_RETRIES) {
        setStatus('The server stopped answering; reload to try again.', 'error');
        return;
      }
      setStatus('Reconnecting to the event stream…', 'reconnecting');
      await new Promise((r) => setTimeout(r, RETRY_MS));
    }
    setStatus('The call has ended.', 'ended');
  }

  $('token-field').addEventListener('submit', (e) => {
    e.preventDefault();
    saveToken($('token').value.trim());
    $('token-field').hidden = true;
    watch();
  });
  $('token').value = loadToken();

  window.holdlineSession = { get timeline() { return tl; }, get ended() { return ended; } };
  watch();
})();

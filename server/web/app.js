// Holdline reference web client: one page that talks to a voice agent over
// WebRTC (WHIP-style offer/answer over HTTP, non-trickle ICE) with a data
// channel for session events, captions and typed input.
(() => {
  'use strict';

  // ---------------------------------------------------------------- setup

  const $ = (id) => document.getElementById(id);
  const params = new URLSearchParams(location.search);
  const AUDIO_PROCESSING = params.get('aec') !== '0';
  const AUTOCONNECT = params.get('autoconnect') === '1';
  // ?relay=1 sends media only through the TURN servers the server names:
  // to try a TURN setup, or a caller whose network allows nothing else.
  const RELAY_ONLY = params.get('relay') === '1';

  const RESUME_KEY = 'holdline.resume';
  const TOKEN_KEY = 'holdline.token';

  const ICE_GATHER_TIMEOUT_MS = 3000;
  const OPEN_TIMEOUT_MS = 20000;
  const DISCONNECTED_GRACE_MS = 3000;
  const RECONNECT_INTERVAL_MS = 2000;
  const DELETE_TIMEOUT_MS = 3000;
  const SAMPLE_MS = 10;
  const LEVEL_WINDOW_MS = 60000;
  const SPEAKING_THRESHOLD = 0.01;
  const SPEAKING_HOLD_MS = 250;
  const FFT_SIZE = 512;

  const LIVE_STATES = new Set(['connecting', 'connected', 'resuming', 'reconnecting']);

  // Kinds hidden from the timeline unless "show all" is ticked.
  const NOISY = new Set(['speech_started', 'speech_stopped', 'idle', 'turn_started',
    'inference_sent', 'turn_settled', 'transcript', 'checkpoint_saved']);

  // kind → [label, tone]
  const KINDS = {
    session_started: ['Session started', 'session'],
    session_ended: ['Session ended', 'session'],
    speech_started: ['Caller started speaking', 'user'],
    speech_stopped: ['Caller stopped speaking', 'user'],
    transcript: ['Heard', 'user'],
    user_turn: ['Caller turn', 'user'],
    barge_in_suspected: ['Barge-in suspected', 'barge'],
    barge_in_confirmed: ['Barge-in confirmed', 'barge'],
    barge_in_resumed: ['Barge-in dismissed, resumed', 'barge'],
    transcript_ignored: ['Transcript ignored', 'quiet'],
    dtmf: ['Key pressed', 'user'],
    turn_started: ['Agent turn started', 'agent'],
    inference_sent: ['Model request sent', 'agent'],
    turn_interrupted: ['Agent turn interrupted', 'barge'],
    playout_started: ['Agent started speaking', 'agent'],
    playout_done: ['Agent finished speaking', 'agent'],
    playout_truncated: ['Agent cut off', 'barge'],
    turn_settled: ['Agent turn settled', 'agent'],
    idle: ['Idle', 'quiet'],
    transport_lost: ['Connection lost', 'warn'],
    transport_restored: ['Connection restored', 'ok'],
    provider_error: ['Provider error', 'warn'],
    provider_failover: ['Provider failover', 'warn'],
    events_dropped: ['Events dropped', 'warn'],
    checkpoint_saved: ['Checkpoint saved', 'quiet'],
    checkpoint_failed: ['Checkpoint failed', 'warn'],
    session_resumed: ['Session taken over', 'ok'],
    session_moved: ['Moved to another server', 'ok'],
    handoff: ['Handed over', 'agent'],
  };

  const TOOL_KINDS = {
    tool_requested: 'requested',
    tool_deferred: 'deferred',
    tool_started: 'started',
    tool_cancel_requested: 'cancel requested',
    tool_deduped: 'deduped',
    tool_reconcile: 'reconcile',
    tool_late_outcome: 'late outcome',
    tool_terminal: 'finished',
    tool_committed: 'committed',
  };
  const TOOL_CHIP = {
    tool_requested: 'requested',
    tool_deferred: 'deferred',
    tool_started: 'started',
    tool_cancel_requested: 'cancelling',
  };
  const TERMINAL = new Set(['succeeded', 'failed', 'cancelled', 'timed_out', 'unknown']);

  const ui = {
    agent: $('agent'),
    status: $('status'),
    tokenField: $('token-field'),
    token: $('token'),
    tokenNote: $('token-note'),
    connect: $('connect'),
    disconnect: $('disconnect'),
    mute: $('mute'),
    micLabel: $('mic-label'),
    sound: $('sound'),
    micMeter: $('mic-meter'),
    micFill: document.querySelector('#mic-meter .meter-fill'),
    micNote: $('mic-note'),
    speaking: $('speaking'),
    speakingText: document.querySelector('#speaking .speaking-text'),
    transcript: $('transcript'),
    transcriptEmpty: $('transcript-empty'),
    hearing: $('hearing'),
    composer: $('composer'),
    text: $('text'),
    send: $('send'),
    showAll: $('show-all'),
    openTimeline: $('open-timeline'),
    timeline: $('timeline'),
    remote: $('remote'),
  };

  // ---------------------------------------------------------------- state

  const config = { agent: '', auth_required: false, resume_ttl_ms: 120000 };
  let configReady = Promise.resolve();

  let state = 'idle';
  let sessionId = null;
  let resumed = false;
  let muted = false;

  let events = [];
  let seen = new Set();
  let lastSeq = 0;
  let sessionStartWall = null; // ms since the epoch at session time 0, from the events

  const levelLog = [];
  let lastLevels = { mic: 0, sent: 0, agent: 0 };
  let lastAgentLoud = -Infinity;
  let speakingOn = false;

  let gen = 0; // bumps whenever the current peer connection is replaced or dropped
  let pc = null;
  let dc = null;
  let inFlight = null;
  let reconnecting = false;
  let lossStart = null;
  let disconnectTimer = null;
  let sessionOver = false;
  let userStopped = false;

  let micStream = null;
  let micTrack = null;
  let micClone = null;
  let audioCtx = null;
  let micSource = null;
  let micAnalyser = null;
  let agentSource = null;
  let agentAnalyser = null;
  let remoteBlocked = false;

  const waiters = [];

  // ---------------------------------------------------------------- storage

  function loadResume() {
    try {
      const raw = sessionStorage.getItem(RESUME_KEY);
      if (!raw) return null;
      const r = JSON.parse(raw);
      return r && typeof r.location === 'string' ? r : null;
    } catch (_) {
      return null;
    }
  }

  function saveResume(r) {
    try { sessionStorage.setItem(RESUME_KEY, JSON.stringify(r)); } catch (_) { /* storage off */ }
  }

  function clearResume() {
    try { sessionStorage.removeItem(RESUME_KEY); } catch (_) { /* storage off */ }
  }

  // The access token is kept for this tab only (sessionStorage): it goes
  // with the tab, and is not left behind for whoever uses the browser next.
  function loadToken() {
    try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch (_) { return ''; }
  }

  function saveToken(t) {
    try {
      if (t) sessionStorage.setItem(TOKEN_KEY, t); else sessionStorage.removeItem(TOKEN_KEY);
    } catch (_) { /* storage off */ }
  }

  // Earlier versions kept the token in localStorage, for good: forget it.
  try { localStorage.removeItem(TOKEN_KEY); } catch (_) { /* storage off */ }

  function authHeaders() {
    const t = (ui.token.value || loadToken()).trim();
    return t ? { Authorization: `Bearer ${t}` } : {};
  }

  // ---------------------------------------------------------------- state & controls

  const DEFAULT_STATUS = {
    idle: 'Ready. Press Connect to start talking.',
    connecting: 'Connecting…',
    connected: 'Connected. Speak, or type a message.',
    resuming: 'Resuming your conversation…',
    reconnecting: 'Connection lost. Reconnecting…',
    ended: 'Conversation ended.',
    error: 'Something went wrong.',
  };

  function setState(s, message, tone) {
    state = s;
    document.body.dataset.state = s;
    setStatus(message || DEFAULT_STATUS[s] || s, tone || (s === 'error' ? 'error' : ''));
    updateControls();
    if (s === 'connected') settleWaiters(null);
    else if (s === 'ended' || s === 'error') settleWaiters(new Error(message || DEFAULT_STATUS[s]));
  }

  function setStatus(text, tone) {
    ui.status.textContent = text;
    if (tone) ui.status.dataset.tone = tone; else delete ui.status.dataset.tone;
  }

  function settleWaiters(err) {
    while (waiters.length) {
      const w = waiters.shift();
      if (err) w.reject(err); else w.resolve();
    }
  }

  function whenConnected() {
    if (state === 'connected') return Promise.resolve();
    return new Promise((resolve, reject) => waiters.push({ resolve, reject }));
  }

  function channelOpen() {
    return !!dc && dc.readyState === 'open';
  }

  function updateControls() {
    const live = LIVE_STATES.has(state);
    const resume = loadResume();
    ui.connect.disabled = live;
    ui.connect.textContent = resume && !live ? 'Reconnect' : 'Connect';
    ui.disconnect.disabled = !(live || resume);
    const open = channelOpen();
    ui.text.disabled = !open;
    ui.send.disabled = !open;
    updateSoundButton();
    updateTimelineLink();
  }

  // The session's lanes view (/sessions/{id}) draws the same events as
  // lanes on a time axis, in a tab of its own.
  function updateTimelineLink() {
    ui.openTimeline.hidden = !sessionId;
    if (sessionId) ui.openTimeline.href = `/sessions/${encodeURIComponent(sessionId)}`;
  }

  function setAgent(name) {
    if (!name) return;
    ui.agent.textContent = name;
    ui.agent.hidden = false;
    document.title = `Holdline · ${name}`;
  }

  function showTokenField(focus) {
    ui.tokenField.hidden = false;
    if (focus) ui.token.focus();
  }

  // A refused token: 'missing' (none sent) or 'wrong' (sent, not this
  // server's), from the 401's WWW-Authenticate (RFC 6750: error= only
  // when a token came). The field says which until the token is edited.
  const AUTH_MESSAGES = {
    missing: 'This server needs an access token: paste it above, then Connect.',
    wrong: 'That access token does not match this server\'s: check it, then Connect.',
  };

  function authProblem(e) {
    const problem = e.auth === 'missing' ? 'missing' : 'wrong';
    showTokenField(true);
    ui.tokenField.dataset.problem = problem;
    ui.token.setAttribute('aria-invalid', 'true');
    ui.tokenNote.textContent = AUTH_MESSAGES[problem];
    ui.tokenNote.hidden = false;
    return AUTH_MESSAGES[problem];
  }

  function clearAuthProblem() {
    delete ui.tokenField.dataset.problem;
    ui.token.removeAttribute('aria-invalid');
    ui.tokenNote.hidden = true;
    ui.tokenNote.textContent = '';
  }

  // ---------------------------------------------------------------- audio

  function ensureAudioContext() {
    if (!audioCtx) {
      const AC = window.AudioContext || window.webkitAudioContext;
      if (!AC) return null;
      try {
        audioCtx = new AC();
      } catch (_) {
        return null;
      }
      audioCtx.addEventListener('statechange', updateSoundButton);
      wireMicAnalyser();
    }
    if (audioCtx.state === 'suspended') audioCtx.resume().catch(() => {});
    return audioCtx;
  }

  function checkSoundSoon() {
    if (audioCtx && audioCtx.state === 'suspended') audioCtx.resume().catch(() => {});
    setTimeout(updateSoundButton, 400);
  }

  function updateSoundButton() {
    const blocked = (!!audioCtx && audioCtx.state === 'suspended') || remoteBlocked;
    ui.sound.hidden = !(blocked && LIVE_STATES.has(state));
  }

  function unlockAudio() {
    ensureAudioContext();
    if (ui.remote.srcObject) {
      ui.remote.play().then(() => { remoteBlocked = false; updateSoundButton(); }).catch(() => {});
    }
    setTimeout(updateSoundButton, 200);
  }

  function makeAnalyser() {
    const a = audioCtx.createAnalyser();
    a.fftSize = FFT_SIZE;
    a.smoothingTimeConstant = 0;
    return a;
  }

  function wireMicAnalyser() {
    if (!audioCtx || !micClone || micAnalyser) return;
    try {
      micSource = audioCtx.createMediaStreamSource(new MediaStream([micClone]));
      micAnalyser = makeAnalyser();
      micSource.connect(micAnalyser);
    } catch (_) {
      micSource = null;
      micAnalyser = null;
    }
  }

  async function ensureMic() {
    if (micTrack && micTrack.readyState === 'live') return micTrack;
    if (!navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) {
      showMicNote('This browser gives no microphone access here; you can still type.');
      return null;
    }
    try {
      micStream = await navigator.mediaDevices.getUserMedia({
        audio: {
          echoCancellation: AUDIO_PROCESSING,
          autoGainControl: AUDIO_PROCESSING,
          noiseSuppression: AUDIO_PROCESSING,
        },
        video: false,
      });
    } catch (e) {
      showMicNote(`Microphone unavailable (${e && e.name ? e.name : e}); you can still type.`);
      return null;
    }
    micTrack = micStream.getAudioTracks()[0] || null;
    if (!micTrack) return null;
    micTrack.enabled = !muted;
    micClone = micTrack.clone();
    micClone.enabled = true;
    showMicNote('');
    wireMicAnalyser();
    return micTrack;
  }

  function stopMic() {
    if (micSource) { try { micSource.disconnect(); } catch (_) { /* gone */ } }
    micSource = null;
    micAnalyser = null;
    for (const t of [micTrack, micClone]) if (t) t.stop();
    if (micStream) micStream.getTracks().forEach((t) => t.stop());
    micStream = null;
    micTrack = null;
    micClone = null;
  }

  function showMicNote(text) {
    ui.micNote.textContent = text;
    ui.micNote.hidden = !text;
  }

  function onRemoteTrack(e) {
    if (e.track.kind !== 'audio') return;
    const stream = (e.streams && e.streams[0]) || new MediaStream([e.track]);
    // Chrome only feeds remote WebRTC audio into WebAudio when the stream also
    // plays in a media element.
    ui.remote.srcObject = stream;
    ui.remote.play().then(() => { remoteBlocked = false; updateSoundButton(); })
      .catch(() => { remoteBlocked = true; updateSoundButton(); });
    detachAgentAnalyser();
    if (audioCtx) {
      try {
        agentSource = audioCtx.createMediaStreamSource(stream);
        agentAnalyser = makeAnalyser();
        agentSource.connect(agentAnalyser);
      } catch (_) {
        agentSource = null;
        agentAnalyser = null;
      }
    }
    checkSoundSoon();
  }

  function detachAgentAnalyser() {
    if (agentSource) { try { agentSource.disconnect(); } catch (_) { /* gone */ } }
    agentSource = null;
    agentAnalyser = null;
  }

  function detachRemote() {
    detachAgentAnalyser();
    ui.remote.srcObject = null;
    remoteBlocked = false;
  }

  function setMuted(m) {
    muted = !!m;
    if (micTrack) micTrack.enabled = !muted;
    // A toggle button keeps its name; aria-pressed carries the state.
    ui.mute.setAttribute('aria-pressed', String(muted));
    ui.micMeter.classList.toggle('muted', muted);
    ui.micLabel.textContent = muted ? 'Mic muted' : 'Mic';
    document.body.classList.toggle('is-muted', muted);
    return muted;
  }

  // ---------------------------------------------------------------- levels

  const sampleBuf = new Float32Array(FFT_SIZE);

  function rms(an) {
    if (!an) return 0;
    an.getFloatTimeDomainData(sampleBuf);
    let s = 0;
    for (let i = 0; i < sampleBuf.length; i++) s += sampleBuf[i] * sampleBuf[i];
    return Math.sqrt(s / sampleBuf.length);
  }

  function meterFraction(level) {
    const db = 20 * Math.log10(Math.max(level, 1e-5));
    return Math.min(1, Math.max(0, (db + 60) / 60));
  }

  function sample() {
    const t = performance.now();
    const mic = rms(micAnalyser);
    const sent = muted || !micTrack ? 0 : mic;
    const agent = rms(agentAnalyser);
    lastLevels = { mic, sent, agent };
    levelLog.push({ t, mic, sent, agent });
    // Trim in batches, once the oldest entry is a second past the window.
    if (levelLog[0].t < t - LEVEL_WINDOW_MS - 1000) {
      let i = 0;
      while (i < levelLog.length && levelLog[i].t < t - LEVEL_WINDOW_MS) i++;
      levelLog.splice(0, i);
    }

    ui.micFill.style.transform = `scaleX(${meterFraction(mic).toFixed(3)})`;

    if (agent > SPEAKING_THRESHOLD) lastAgentLoud = t;
    const on = t - lastAgentLoud <= SPEAKING_HOLD_MS;
    if (on !== speakingOn) {
      speakingOn = on;
      ui.speaking.dataset.on = String(on);
      ui.speaking.classList.toggle('on', on);
      ui.speakingText.textContent = on ? 'Agent speaking' : 'Agent quiet';
    }
  }

  // ---------------------------------------------------------------- signalling

  class HttpError extends Error {
    constructor(status, message, challenge) {
      super(message);
      this.name = 'HttpError';
      this.status = status;
      if (status === 401) this.auth = /error="?[a-z_]+/i.test(challenge || '') ? 'wrong' : 'missing';
    }
  }

  let cancelCurrent = () => {};

  // bumpGen retires the current peer connection: its callbacks go quiet and
  // an attempt still under way rejects as cancelled.
  function bumpGen() {
    gen++;
    const cancel = cancelCurrent;
    cancelCurrent = () => {};
    cancel();
  }

  function cancelled() {
    const e = new Error('Cancelled');
    e.cancelled = true;
    return e;
  }

  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

  function gatheringComplete(conn) {
    if (conn.iceGatheringState === 'complete') return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        conn.removeEventListener('icegatheringstatechange', check);
        resolve();
      };
      const check = () => { if (conn.iceGatheringState === 'complete') done(); };
      const timer = setTimeout(done, ICE_GATHER_TIMEOUT_MS);
      conn.addEventListener('icegatheringstatechange', check);
    });
  }

  function idFromLocation(loc) {
    if (!loc) return null;
    try {
      const parts = new URL(loc, location.href).pathname.split('/').filter(Boolean);
      return parts.length ? decodeURIComponent(parts[parts.length - 1]) : null;
    } catch (_) {
      return null;
    }
  }

  function closeConnection(conn, channel) {
    if (channel) { try { channel.close(); } catch (_) { /* closed */ } }
    if (conn) { try { conn.close(); } catch (_) { /* closed */ } }
    if (pc === conn) {
      pc = null;
      dc = null;
      detachRemote();
    }
  }

  // rtcConfiguration is the peer connection's configuration: the STUN and
  // TURN servers the server names. TURN credentials are minted per request
  // and expire, and are given only with the token, so they are asked for
  // again at each connection when there may be any.
  async function rtcConfiguration() {
    let servers = config.ice_servers || [];
    if (config.auth_required || servers.some((s) => s.credential)) {
      try {
        const res = await fetch('/v1/config', { headers: authHeaders(), cache: 'no-store' });
        const c = res.ok ? await res.json() : null;
        if (c && Array.isArray(c.ice_servers)) servers = c.ice_servers;
      } catch (_) { /* keep the servers the page loaded with */ }
    }
    const cfg = { iceServers: servers };
    if (RELAY_ONLY) cfg.iceTransportPolicy = 'relay';
    return cfg;
  }

  // attempt makes one offer on a new peer connection (resuming with token
  // when given) and resolves once the data channel is open.
  async function attempt(resumeToken) {
    bumpGen();
    const myGen = gen;
    // A closed peer connection abandons its pending operations without
    // settling them, so every wait below also ends when the attempt is
    // superseded or stopped.
    const stopped = new Promise((_, reject) => { cancelCurrent = () => reject(cancelled()); });
    stopped.catch(() => {});
    const step = (p) => Promise.race([p, stopped]);
    clearTimeout(disconnectTimer);
    closeConnection(pc, dc);

    const conn = new RTCPeerConnection(await step(rtcConfiguration()));
    const channel = conn.createDataChannel('holdline', { ordered: true });
    pc = conn;
    dc = channel;
    if (micTrack && micTrack.readyState === 'live') {
      conn.addTransceiver(micTrack, { direction: 'sendrecv' });
    } else {
      conn.addTransceiver('audio', { direction: 'sendrecv' });
    }
    conn.ontrack = (e) => { if (myGen === gen) onRemoteTrack(e); };
    conn.addEventListener('connectionstatechange', () => onConnectionState(conn, myGen));
    channel.onmessage = (e) => {
      if (myGen !== gen) return;
      let msg;
      try { msg = JSON.parse(e.data); } catch (_) { return; }
      ingest(msg);
    };

    const opened = new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('Timed out waiting for the connection')), OPEN_TIMEOUT_MS);
      channel.onopen = () => {
        clearTimeout(timer);
        if (myGen !== gen) { reject(cancelled()); return; }
        channel.send(JSON.stringify({ type: 'hello', after: lastSeq }));
        resolve();
      };
      channel.onclose = () => {
        clearTimeout(timer);
        reject(new Error('The connection closed'));
        if (myGen === gen) onChannelClosed();
      };
      conn.addEventListener('connectionstatechange', () => {
        if (conn.connectionState === 'failed' || conn.connectionState === 'closed') {
          clearTimeout(timer);
          reject(new Error('The connection failed'));
        }
      });
    });
    opened.catch(() => {});

    try {
      const offer = await step(conn.createOffer());
      await step(conn.setLocalDescription(offer));
      await step(gatheringComplete(conn));
      if (myGen !== gen) throw cancelled();

      const headers = { 'Content-Type': 'application/sdp', ...authHeaders() };
      if (resumeToken) headers['Holdline-Resume-Token'] = resumeToken;
      let res;
      try {
        res = await fetch('/v1/sessions', { method: 'POST', headers, body: conn.localDescription.sdp, cache: 'no-store' });
      } catch (_) {
        throw new HttpError(0, 'Cannot reach the server');
      }
      const body = await res.text();
      if (myGen !== gen) {
        // Stopped while the offer was in flight: end the session it made.
        const loc = res.ok && userStopped ? res.headers.get('Location') : null;
        if (loc) fetch(loc, { method: 'DELETE', headers: authHeaders() }).catch(() => {});
        throw cancelled();
      }
      if (!res.ok) throw new HttpError(res.status, body.trim() || res.statusText || `HTTP ${res.status}`, res.headers.get('WWW-Authenticate'));
      clearAuthProblem();

      const loc = res.headers.get('Location');
      const token = res.headers.get('Holdline-Resume-Token');
      if (loc) saveResume({ location: loc, token: token || null });
      resumed = res.headers.get('Holdline-Session-Resumed') === 'true';
      const id = idFromLocation(loc);
      if (id && sessionId && id !== sessionId) resetStore();
      if (id) sessionId = id;
      if (resumed) addLocalEntry('resumed', 'Resumed session', 'ok');

      await step(conn.setRemoteDescription({ type: 'answer', sdp: body }));
      await step(opened);
      if (myGen !== gen) throw cancelled();
    } catch (e) {
      if (myGen !== gen) throw e.cancelled ? e : cancelled(); // replaced or stopped meanwhile
      bumpGen();
      closeConnection(conn, channel);
      throw e;
    }
  }

  function onConnectionState(conn, myGen) {
    if (myGen !== gen) return;
    const s = conn.connectionState;
    if (s === 'connected') {
      clearTimeout(disconnectTimer);
      lossStart = null;
    } else if (s === 'disconnected') {
      if (lossStart == null) lossStart = performance.now();
      clearTimeout(disconnectTimer);
      disconnectTimer = setTimeout(() => {
        if (myGen === gen && conn.connectionState === 'disconnected') onConnectionLost();
      }, DISCONNECTED_GRACE_MS);
    } else if (s === 'failed') {
      if (lossStart == null) lossStart = performance.now();
      onConnectionLost();
    }
  }

  function onChannelClosed() {
    if (lossStart == null) lossStart = performance.now();
    onConnectionLost();
  }

  function onConnectionLost() {
    if (state !== 'connected' || sessionOver || userStopped) return;
    reconnectLoop();
  }

  // moveTo follows a draining server's move: the next offer carries the
  // move's token, and lands on another server behind the same address.
  function moveTo(token) {
    if (state !== 'connected' || sessionOver || userStopped) return;
    const r = loadResume();
    const location = (r && r.location) || (sessionId ? `/v1/sessions/${sessionId}` : '');
    saveResume({ location, token });
    lossStart = performance.now();
    reconnectLoop('Moving to another server…');
  }

  async function reconnectLoop(why) {
    if (reconnecting) return;
    reconnecting = true;
    const started = lossStart != null ? lossStart : performance.now();
    const ttl = Number(config.resume_ttl_ms) > 0 ? Number(config.resume_ttl_ms) : 120000;
    if (why) setState('reconnecting', why); else setState('reconnecting');
    try {
      for (;;) {
        if (sessionOver || userStopped) return;
        const r = loadResume();
        if (!r || !r.token) {
          sessionGone('The connection was lost and the conversation cannot be resumed.');
          return;
        }
        const t0 = performance.now();
        try {
          await attempt(r.token);
          setConnected();
          return;
        } catch (e) {
          if (e.cancelled || userStopped || sessionOver) return;
          if (e.status === 404 || e.status === 410) {
            sessionGone();
            return;
          }
          if (e.status === 401) {
            setState('error', authProblem(e));
            return;
          }
          if (performance.now() - started > ttl) {
            sessionGone('Could not reconnect in time. The conversation has ended.');
            return;
          }
          setState('reconnecting', `Connection lost. Reconnecting… (${e.message})`, 'warn');
          await sleep(Math.max(0, RECONNECT_INTERVAL_MS - (performance.now() - t0)));
        }
      }
    } finally {
      reconnecting = false;
      lossStart = null;
    }
  }

  function setConnected() {
    lossStart = null;
    setState('connected', resumed ? 'Connected. Your conversation was resumed.' : DEFAULT_STATUS.connected);
    checkSoundSoon();
    if (!ui.text.matches(':focus') && window.matchMedia('(hover: hover)').matches) {
      ui.text.focus({ preventScroll: true });
    }
  }

  function sessionGone(message) {
    sessionOver = true;
    bumpGen();
    clearTimeout(disconnectTimer);
    clearResume();
    closeConnection(pc, dc);
    stopMic();
    setState('ended', message || 'The previous conversation has ended.', 'warn');
  }

  // ---------------------------------------------------------------- public actions

  function connect() {
    // Runs synchronously inside the click: the audio context is allowed to start.
    ensureAudioContext();
    if (state === 'connected') return Promise.resolve();
    if (inFlight) return inFlight;
    if (reconnecting) return whenConnected();

    const startGen = gen;
    const run = (async () => {
      await configReady;
      if (gen !== startGen) throw cancelled(); // stopped while the configuration loaded
      if (state === 'connected') return;
      sessionOver = false;
      userStopped = false;
      const r = loadResume();
      const resuming = !!(r && r.token);
      if (resuming) {
        setState('resuming');
      } else {
        clearResume();
        resetStore();
        sessionId = null;
        resumed = false;
        setState('connecting');
      }
      await ensureMic();
      if (userStopped) {
        stopMic();
        throw cancelled();
      }
      try {
        await attempt(resuming ? r.token : null);
      } catch (e) {
        if (e.cancelled) throw e;
        if (resuming && (e.status === 404 || e.status === 410)) {
          sessionGone();
        } else {
          setState('error', e.status === 401 ? authProblem(e) : e.message || String(e));
        }
        throw e;
      }
      setConnected();
    })();
    inFlight = run;
    const clear = () => { if (inFlight === run) inFlight = null; };
    run.then(clear, clear);
    return run;
  }

  async function disconnect() {
    userStopped = true;
    bumpGen();
    clearTimeout(disconnectTimer);
    const r = loadResume();
    const conn = pc;
    const channel = dc;
    clearResume();
    stopMic();
    setHearing('');
    // Nothing more of this call will arrive: what the agent was saying
    // stops where the caller stopped hearing it.
    closeOpenBubbles('call ended');
    if (r || conn) addLocalEntry('call_ended', 'You ended the call', 'session');
    setState('ended', 'Conversation ended.');
    if (conn) closeConnectionLater(conn, channel);
    try {
      if (r && r.location) {
        const ctl = new AbortController();
        const timer = setTimeout(() => ctl.abort(), DELETE_TIMEOUT_MS);
        try {
          await fetch(r.location, { method: 'DELETE', headers: authHeaders(), signal: ctl.signal });
        } finally {
          clearTimeout(timer);
        }
      }
    } catch (_) {
      // The session times out on the server anyway.
    } finally {
      closeConnection(conn, channel);
    }
  }

  // The peer connection stays up until the DELETE answers (or times out), so
  // the server sees the session end rather than a dropped transport.
  function closeConnectionLater(conn, channel) {
    if (pc === conn) {
      pc = null;
      dc = null;
      detachRemote();
    }
    setTimeout(() => closeConnection(conn, channel), DELETE_TIMEOUT_MS + 500);
    updateControls();
  }

  function sendText(s) {
    const text = String(s == null ? '' : s).trim();
    if (!text || !channelOpen()) return false;
    dc.send(JSON.stringify({ type: 'text', text }));
    addPendingUser(text);
    return true;
  }

  // ---------------------------------------------------------------- messages

  function ingest(msg) {
    if (!msg || typeof msg !== 'object') return;
    switch (msg.type) {
      case 'session':
        if (msg.id) sessionId = msg.id;
        updateTimelineLink();
        if (msg.agent) setAgent(msg.agent);
        if (typeof msg.resumed === 'boolean') resumed = msg.resumed;
        break;
      case 'event':
        ingestEvent(msg.event);
        break;
      case 'caption':
        renderCaption(msg.epoch, msg.text || '');
        break;
      case 'move':
        // The server is draining: take the session to another one
        // through the same front door, with the token it gave.
        if (typeof msg.token === 'string' && msg.token) moveTo(msg.token);
        break;
      case 'error':
        if (msg.refused === 'text') refusePending(msg.error);
        setStatus(msg.error || msg.text || 'Server error', 'error');
        break;
      default:
        break;
    }
  }

  function ingestEvent(ev) {
    if (!ev || typeof ev.seq !== 'number' || seen.has(ev.seq)) return;
    seen.add(ev.seq);
    let i = events.length;
    while (i > 0 && events[i - 1].seq > ev.seq) i--;
    events.splice(i, 0, ev);
    if (ev.seq > lastSeq) lastSeq = ev.seq;

    if (sessionStartWall == null && ev.time && typeof ev.at_ns === 'number') {
      const wall = Date.parse(ev.time);
      if (!Number.isNaN(wall)) {
        sessionStartWall = wall - ev.at_ns / 1e6;
        placePendingLocals();
      }
    }

    renderTranscriptEvent(ev);
    renderTimelineEvent(ev);

    if (ev.kind === 'session_ended') {
      sessionOver = true;
      const conn = pc;
      const channel = dc;
      bumpGen();
      clearTimeout(disconnectTimer);
      clearResume();
      stopMic();
      ui.hearing.hidden = true;
      if (conn) closeConnectionLater(conn, channel);
      setState('ended', ev.reason ? `The conversation has ended (${ev.reason}).` : 'The conversation has ended.');
    }
  }

  function resetStore() {
    events = [];
    seen = new Set();
    lastSeq = 0;
    sessionStartWall = null;
    pendingLocals.length = 0;
    agentBubbles.clear();
    pendingUser.length = 0;
    toolCards.clear();
    ui.transcript.replaceChildren(ui.transcriptEmpty);
    ui.transcriptEmpty.hidden = false;
    ui.hearing.hidden = true;
    ui.hearing.textContent = '';
    ui.timeline.replaceChildren();
    stuck.set(ui.transcript, true);
    stuck.set(ui.timeline, true);
  }

  // ---------------------------------------------------------------- transcript

  const agentBubbles = new Map(); // epoch → {el, textEl, final}
  const pendingUser = []; // typed messages not yet confirmed by a user_turn

  function nearBottom(el) {
    return el.scrollHeight - el.scrollTop - el.clientHeight < 48;
  }

  // A log follows new entries while the reader is at its end; scrolling up
  // stops that until they scroll back down.
  const stuck = new WeakMap();

  function followEnd(el) {
    stuck.set(el, true);
    el.addEventListener('scroll', () => stuck.set(el, nearBottom(el)), { passive: true });
    if (window.ResizeObserver) {
      new ResizeObserver(() => { if (stuck.get(el)) el.scrollTop = el.scrollHeight; }).observe(el);
    }
  }

  function withStickyScroll(el, fn) {
    const stick = stuck.has(el) ? stuck.get(el) : nearBottom(el);
    const r = fn();
    if (stick) el.scrollTop = el.scrollHeight;
    return r;
  }

  function el(tag, cls, text) {
    const n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text != null) n.textContent = text;
    return n;
  }

  function makeBubble(role) {
    const b = el('div', `msg ${role}`);
    b.appendChild(el('span', 'who', role === 'user' ? 'You' : 'Agent'));
    const textEl = el('p', 'text');
    b.appendChild(textEl);
    return { b, textEl };
  }

  function appendBubble(node) {
    ui.transcriptEmpty.hidden = true;
    withStickyScroll(ui.transcript, () => {
      // Keep the bubbles above nothing but the end of the log.
      ui.transcript.appendChild(node);
    });
  }

  function addUserBubble(text, typed) {
    const { b, textEl } = makeBubble('user');
    textEl.textContent = text;
    if (typed) b.appendChild(el('span', 'tag', 'typed'));
    appendBubble(b);
    return b;
  }

  function addPendingUser(text) {
    const b = addUserBubble(text, true);
    b.classList.add('pending');
    pendingUser.push(b);
  }

  // The server refused the oldest typed message still waiting: it is not a
  // turn, and its bubble says so rather than waiting forever.
  function refusePending(reason) {
    const b = pendingUser.shift();
    if (!b) return;
    b.classList.remove('pending');
    b.classList.add('refused');
    const tag = b.querySelector('.tag');
    if (tag) tag.textContent = 'not sent';
    if (reason) b.title = reason;
  }

  // closeOpenBubbles ends every agent bubble still being spoken: the words
  // so far stay, tagged with why they stop there.
  function closeOpenBubbles(why) {
    for (const [, entry] of agentBubbles) {
      if (entry.final || !entry.el) continue;
      entry.final = true;
      withStickyScroll(ui.transcript, () => {
        entry.el.classList.remove('live');
        entry.textEl.removeAttribute('aria-hidden');
        if (!entry.textEl.textContent) {
          entry.el.remove();
          return;
        }
        entry.el.classList.add('interrupted');
        entry.el.appendChild(el('span', 'tag', why));
      });
    }
  }

  function agentBubble(epoch) {
    let entry = agentBubbles.get(epoch);
    if (!entry) {
      const { b, textEl } = makeBubble('agent');
      b.dataset.epoch = String(epoch);
      entry = { el: b, textEl, final: false };
      agentBubbles.set(epoch, entry);
      appendBubble(b);
    }
    return entry;
  }

  function renderCaption(epoch, text) {
    const existing = agentBubbles.get(epoch);
    if (existing && existing.final) return;
    if (!existing && !text) return;
    const entry = agentBubble(epoch);
    withStickyScroll(ui.transcript, () => {
      entry.el.classList.add('live');
      // Live words are not announced one by one; the final text is.
      entry.textEl.setAttribute('aria-hidden', 'true');
      entry.textEl.textContent = text;
    });
  }

  function finaliseAgent(epoch, text, interrupted) {
    const existing = agentBubbles.get(epoch);
    if (existing && existing.final) return;
    const said = text || (existing ? existing.textEl.textContent : '');
    if (!said) {
      if (existing) {
        existing.el.remove();
        existing.final = true;
      } else {
        agentBubbles.set(epoch, { el: null, textEl: null, final: true });
      }
      return;
    }
    const entry = agentBubble(epoch);
    entry.final = true;
    withStickyScroll(ui.transcript, () => {
      entry.el.classList.remove('live');
      const textEl = el('p', 'text', said);
      entry.textEl.replaceWith(textEl);
      entry.textEl = textEl;
      if (interrupted) {
        entry.el.classList.add('interrupted');
        entry.el.appendChild(el('span', 'tag', 'interrupted'));
      }
    });
  }

  function setHearing(text) {
    if (!text) {
      ui.hearing.hidden = true;
      ui.hearing.textContent = '';
      return;
    }
    ui.hearing.replaceChildren(el('span', 'hearing-label', 'hearing: '), document.createTextNode(text));
    ui.hearing.hidden = false;
  }

  function renderTranscriptEvent(ev) {
    switch (ev.kind) {
      case 'user_turn': {
        setHearing('');
        const typed = ev.reason === 'injected';
        if (typed && pendingUser.length) {
          const b = pendingUser.shift();
          b.classList.remove('pending');
          const t = b.querySelector('.text');
          if (ev.text && t.textContent !== ev.text) t.textContent = ev.text;
        } else if (ev.text) {
          addUserBubble(ev.text, typed);
        }
        break;
      }
      case 'transcript':
        if (ev.text) setHearing(ev.text);
        break;
      case 'transcript_ignored':
        setHearing('');
        break;
      case 'playout_done':
        finaliseAgent(ev.epoch, ev.text || '', false);
        break;
      case 'playout_truncated':
        finaliseAgent(ev.epoch, ev.text || '', true);
        break;
      default:
        break;
    }
  }

  // ---------------------------------------------------------------- timeline

  const toolCards = new Map(); // call_id → {li, chip, late, steps, committed}
  const pendingLocals = []; // local entries waiting for the session clock

  function fmtTime(atNs) {
    if (typeof atNs !== 'number' || !Number.isFinite(atNs)) return '–';
    return `${(atNs / 1e9).toFixed(2)}s`;
  }

  function fmtPlayed(ns) {
    return typeof ns === 'number' && ns > 0 ? `${(ns / 1e9).toFixed(1)} s played` : '';
  }

  function quote(text) {
    return text ? `“${text}”` : '';
  }

  function join(...parts) {
    return parts.filter(Boolean).join(' · ');
  }

  function insertTimeline(li, at) {
    li.dataset.at = String(at);
    withStickyScroll(ui.timeline, () => {
      let before = null;
      let node = ui.timeline.lastElementChild;
      while (node && Number(node.dataset.at) > at) {
        before = node;
        node = node.previousElementSibling;
      }
      ui.timeline.insertBefore(li, before);
    });
  }

  function timelineItem({ kind, label, detail, tone, at, epoch, seq, noisy }) {
    const li = el('li', `tl-item tone-${tone || 'plain'}`);
    li.dataset.kind = kind;
    if (seq != null) li.dataset.seq = String(seq);
    if (noisy || NOISY.has(kind)) li.classList.add('noisy');
    const time = el('span', 'tl-time', fmtTime(at));
    const main = el('div', 'tl-main');
    const head = el('div', 'tl-head');
    const lab = el('span', 'tl-label', label);
    lab.title = kind;
    head.appendChild(lab);
    if (epoch) head.appendChild(el('span', 'tl-epoch', `turn ${epoch}`));
    main.appendChild(head);
    if (detail) main.appendChild(el('div', 'tl-detail', detail));
    li.append(time, main);
    return li;
  }

  // silentCut: a turn cut before any of it was played (the caller left,
  // or spoke, while the agent was still thinking). Nothing was cut off the
  // caller's hearing; turn_interrupted already says why the turn stopped.
  // A reload while the agent thinks makes one: shown as "Agent cut off"
  // it was an empty line.
  function silentCut(ev) {
    return ev.kind === 'playout_truncated' && !ev.text && !(ev.played_ns > 0);
  }

  function describe(ev) {
    if (silentCut(ev)) return { label: 'Agent turn dropped before speaking', tone: 'quiet', detail: 'nothing had played', noisy: true };
    const [label, tone] = KINDS[ev.kind] || [ev.kind, 'plain'];
    let detail = '';
    switch (ev.kind) {
      case 'user_turn':
        detail = join(quote(ev.text), ev.reason === 'injected' ? 'typed' : ev.reason);
        break;
      case 'transcript':
        detail = join(quote(ev.text), ev.final ? 'final' : 'partial');
        break;
      case 'transcript_ignored':
        detail = join(ev.reason, quote(ev.text));
        break;
      case 'playout_done':
      case 'playout_truncated':
        detail = join(quote(ev.text), fmtPlayed(ev.played_ns));
        break;
      case 'provider_error':
      case 'provider_failover':
        detail = [ev.provider, ev.error].filter(Boolean).join(': ') || ev.reason || '';
        break;
      case 'events_dropped':
        detail = `${ev.count || 0} event${ev.count === 1 ? '' : 's'} not delivered`;
        break;
      default:
        detail = join(ev.reason, quote(ev.text), ev.error,
          ev.state && `state ${ev.state}`, ev.provider, ev.tool);
    }
    return { label, tone, detail };
  }

  function renderTimelineEvent(ev) {
    if (ev.kind === 'transcript' && !ev.final) return; // partials live in the hearing line
    if (ev.kind in TOOL_KINDS && ev.call_id) {
      renderToolEvent(ev);
      return;
    }
    const { label, tone, detail, noisy } = describe(ev);
    const li = timelineItem({ kind: ev.kind, label, detail, tone, at: ev.at_ns, epoch: ev.epoch, seq: ev.seq, noisy });
    insertTimeline(li, typeof ev.at_ns === 'number' ? ev.at_ns : Number.MAX_SAFE_INTEGER);
  }

  function setChip(chip, value) {
    chip.textContent = value.replace(/_/g, ' ');
    chip.dataset.state = value;
    chip.className = `chip state-${value.replace(/[^a-z_]/gi, '')}`;
  }

  function renderToolEvent(ev) {
    let card = toolCards.get(ev.call_id);
    if (!card) {
      const li = el('li', 'tl-item tool tone-tool');
      li.dataset.kind = 'tool';
      li.dataset.call = ev.call_id;
      const time = el('span', 'tl-time', fmtTime(ev.at_ns));
      const main = el('div', 'tl-main');
      const head = el('div', 'tool-head');
      const name = el('span', 'tool-name', ev.tool || 'tool');
      const chip = el('span', 'chip');
      const late = el('span', 'chip late');
      late.hidden = true;
      const committed = el('span', 'chip committed', 'committed');
      committed.hidden = true;
      head.append(name, chip, late, committed);
      const id = el('div', 'tool-id', ev.call_id);
      const steps = el('ol', 'tool-steps');
      main.append(head, id, steps);
      li.append(time, main);
      card = { li, name, chip, late, committed, steps };
      toolCards.set(ev.call_id, card);
      setChip(chip, 'requested');
      insertTimeline(li, typeof ev.at_ns === 'number' ? ev.at_ns : Number.MAX_SAFE_INTEGER);
    }
    if (ev.tool && card.name.textContent !== ev.tool) card.name.textContent = ev.tool;

    const current = card.chip.dataset.state;
    const isTerminal = TERMINAL.has(current);
    switch (ev.kind) {
      case 'tool_requested':
      case 'tool_deferred':
      case 'tool_started':
        if (!isTerminal) setChip(card.chip, ev.state && ev.state !== 'running' ? ev.state : TOOL_CHIP[ev.kind]);
        break;
      case 'tool_cancel_requested':
        if (!isTerminal) setChip(card.chip, 'cancelling');
        break;
      case 'tool_terminal':
      case 'tool_deduped':
        if (ev.state) setChip(card.chip, ev.state);
        break;
      case 'tool_committed':
        if (ev.state) setChip(card.chip, ev.state);
        card.committed.hidden = false;
        break;
      case 'tool_late_outcome':
        if (ev.state) {
          card.late.textContent = `late: ${ev.state.replace(/_/g, ' ')}`;
          card.late.hidden = false;
        }
        break;
      default:
        break;
    }

    let detail = '';
    if (ev.kind === 'tool_deduped') detail = join(ev.reason, ev.text && `of ${ev.text}`);
    else if (ev.kind === 'tool_reconcile') detail = join(ev.reason, ev.text && `earlier ${ev.text}`);
    else detail = join(ev.state, ev.reason, ev.error);
    const step = el('li', 'tool-step');
    step.dataset.kind = ev.kind;
    step.dataset.seq = String(ev.seq);
    step.append(el('span', 'tl-time', fmtTime(ev.at_ns)), el('span', 'step-label', TOOL_KINDS[ev.kind]));
    if (detail) step.appendChild(el('span', 'step-detail', detail));
    withStickyScroll(ui.timeline, () => card.steps.appendChild(step));
  }

  // A client-side note in the timeline, timed on the session clock when known.
  function addLocalEntry(kind, label, tone) {
    const li = timelineItem({ kind, label, detail: 'this browser', tone, at: null });
    li.classList.add('local');
    const wall = Date.now();
    if (sessionStartWall != null) {
      const at = Math.max(0, (wall - sessionStartWall) * 1e6);
      li.querySelector('.tl-time').textContent = fmtTime(at);
      insertTimeline(li, at);
    } else {
      pendingLocals.push({ li, wall });
      insertTimeline(li, Number.MAX_SAFE_INTEGER);
    }
  }

  function placePendingLocals() {
    while (pendingLocals.length) {
      const { li, wall } = pendingLocals.shift();
      const at = Math.max(0, (wall - sessionStartWall) * 1e6);
      li.querySelector('.tl-time').textContent = fmtTime(at);
      li.remove();
      insertTimeline(li, at);
    }
  }

  // ---------------------------------------------------------------- wiring

  ui.connect.addEventListener('click', () => { connect().catch(() => {}); });
  ui.disconnect.addEventListener('click', () => { disconnect(); });
  ui.mute.addEventListener('click', () => setMuted(!muted));
  ui.sound.addEventListener('click', unlockAudio);
  ui.composer.addEventListener('submit', (e) => {
    e.preventDefault();
    if (sendText(ui.text.value)) ui.text.value = '';
  });
  followEnd(ui.transcript);
  followEnd(ui.timeline);
  ui.showAll.addEventListener('change', () => {
    withStickyScroll(ui.timeline, () => ui.timeline.classList.toggle('hide-noisy', !ui.showAll.checked));
  });
  ui.tokenField.addEventListener('submit', (e) => {
    e.preventDefault();
    if (!LIVE_STATES.has(state)) connect().catch(() => {});
  });
  ui.token.value = loadToken();
  ui.token.addEventListener('input', () => {
    saveToken(ui.token.value.trim());
    clearAuthProblem();
  });
  ui.remote.addEventListener('playing', () => { remoteBlocked = false; updateSoundButton(); });
  // Any gesture on the page may start audio that autoplay held back.
  const gesture = () => {
    if ((audioCtx && audioCtx.state === 'suspended') || remoteBlocked) unlockAudio();
  };
  document.addEventListener('pointerdown', gesture, true);
  document.addEventListener('keydown', gesture, true);

  setInterval(sample, SAMPLE_MS);

  window.holdline = {
    get state() { return state; },
    get sessionId() { return sessionId; },
    get resumed() { return resumed; },
    get events() { return events; },
    get levelLog() { return levelLog; },
    // The live RTCPeerConnection, for getStats() from tests and debugging.
    get pc() { return pc; },
    // The data channel, for tests that send what the page itself would not.
    get channel() { return dc; },
    get muted() { return muted; },
    set muted(m) { setMuted(m); },
    levels() { return { ...lastLevels }; },
    connect,
    disconnect,
    setMuted,
    sendText,
    _ingest: ingest,
  };

  setMuted(false);
  setState('idle', 'Loading…');

  configReady = (async () => {
    try {
      const res = await fetch('/v1/config', { cache: 'no-store' });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      const c = await res.json();
      Object.assign(config, c || {});
      setAgent(config.agent);
      if (config.auth_required) showTokenField(false);
      if (state === 'idle') setState('idle');
    } catch (e) {
      if (state === 'idle') setStatus(`Could not load the server configuration (${e.message}).`, 'error');
    }
  })();

  configReady.then(() => {
    if (LIVE_STATES.has(state)) return;
    if (loadResume()) {
      connect().catch(() => {});
      checkSoundSoon();
    } else if (AUTOCONNECT) {
      connect().catch(() => {});
      checkSoundSoon();
    }
  });
})();

// Holdline reference web client: one page that talks to a voice agent over
// WebRTC (WHIP-style offer/answer over HTTP, non-trickle ICE) with a data
// channel for session events, captions and typed input. This file puts the
// page together; each part is a module in client/:
//
//   connection.js  connect, resume, reconnect, move, end (peer.js, offer.js)
//   transcript.js  the conversation's bubbles and the "hearing:" line
//   timeline-list.js  the timeline panel (wording in timeline-text.js)
//   controls.js    status line, buttons, token field
//   audio.js, meters.js  microphone, speaker, level meters
//   events.js      the session's events as received; storage.js, the tab's memory
//
// window.holdline is the page's handle for tests and debugging.

import { byId, followEnd } from './client/dom.js';
import { bearer, forgetLegacyToken, loadResume, loadToken, saveToken } from './client/storage.js';
import { EventStore } from './client/events.js';
import { createControls } from './client/controls.js';
import { createAudio } from './client/audio.js';
import { startMeters } from './client/meters.js';
import { createTranscript } from './client/transcript.js';
import { createTimelineList } from './client/timeline-list.js';
import { createConnection } from './client/connection.js';
import { isLive } from './client/connection-rules.js';

const params = new URLSearchParams(location.search);
// ?aec=0 turns the browser's echo cancellation, gain control and noise
// suppression off, to hear what the agent's own processing makes of it.
const AUDIO_PROCESSING = params.get('aec') !== '0';
const AUTOCONNECT = params.get('autoconnect') === '1';
// ?relay=1 sends media only through the TURN servers the server names:
// to try a TURN setup, or a caller whose network allows nothing else.
const RELAY_ONLY = params.get('relay') === '1';

const ui = {
  agent: byId('agent'),
  status: byId('status'),
  tokenField: byId('token-field'),
  token: byId('token'),
  tokenNote: byId('token-note'),
  connect: byId('connect'),
  disconnect: byId('disconnect'),
  mute: byId('mute'),
  micLabel: byId('mic-label'),
  sound: byId('sound'),
  micMeter: byId('mic-meter'),
  micFill: document.querySelector('#mic-meter .meter-fill'),
  micNote: byId('mic-note'),
  speaking: byId('speaking'),
  speakingText: document.querySelector('#speaking .speaking-text'),
  transcript: byId('transcript'),
  transcriptEmpty: byId('transcript-empty'),
  hearing: byId('hearing'),
  composer: byId('composer'),
  text: byId('text'),
  send: byId('send'),
  showAll: byId('show-all'),
  openTimeline: byId('open-timeline'),
  timeline: byId('timeline'),
  remote: byId('remote'),
};

// The server's configuration, as /v1/config gives it.
const config = { agent: '', auth_required: false, resume_ttl_ms: 120000 };
let configReady = Promise.resolve();

forgetLegacyToken();

const store = new EventStore();
const controls = createControls(ui);
const transcript = createTranscript({ log: ui.transcript, empty: ui.transcriptEmpty, hearing: ui.hearing });
const timeline = createTimelineList(ui.timeline, (wall) => store.sessionTime(wall));
// call is assigned below; audio asks it for the state only once running.
let call = null;
const audio = createAudio(ui, { processing: AUDIO_PROCESSING, isLive: () => !!call && isLive(call.state) });
const meters = startMeters(ui, audio);

call = createConnection({
  config,
  whenConfigured: () => configReady,
  relayOnly: RELAY_ONLY,
  authHeaders: () => bearer(ui.token.value || loadToken()),
  afterSeq: () => store.lastSeq,
  onMessage: ingest,
  resetSession,
  audio,
  controls,
  transcript,
  timeline,
});

// resetSession forgets the session shown: a new call starts clean.
function resetSession() {
  store.reset();
  transcript.reset();
  timeline.reset();
}

// ingest takes one message from the server's data channel.
function ingest(msg) {
  if (!msg || typeof msg !== 'object') return;
  switch (msg.type) {
    case 'session':
      call.adoptSession(msg);
      if (msg.agent) controls.setAgent(msg.agent);
      break;
    case 'event':
      ingestEvent(msg.event);
      break;
    case 'caption':
      transcript.caption(msg.epoch, msg.text || '');
      break;
    case 'move':
      // The server is draining: take the session to another one
      // through the same front door, with the token it gave.
      if (typeof msg.token === 'string' && msg.token) call.moveTo(msg.token);
      break;
    case 'error':
      if (msg.refused === 'text') transcript.refuseTyped(msg.error);
      controls.setStatus(msg.error || msg.text || 'Server error', 'error');
      break;
    default:
      break;
  }
}

function ingestEvent(ev) {
  const { added, clockLearned } = store.add(ev);
  if (!added) return;
  if (clockLearned) timeline.placeLocals();
  transcript.render(ev);
  timeline.render(ev);
  if (ev.kind === 'session_ended') call.endedByServer(ev.reason);
}

// ---------------------------------------------------------------- wiring

ui.connect.addEventListener('click', () => { call.connect().catch(() => {}); });
ui.disconnect.addEventListener('click', () => { call.disconnect(); });
ui.mute.addEventListener('click', () => audio.setMuted(!audio.muted));
ui.sound.addEventListener('click', audio.unlock);
ui.composer.addEventListener('submit', (e) => {
  e.preventDefault();
  if (call.sendText(ui.text.value)) ui.text.value = '';
});
followEnd(ui.transcript);
followEnd(ui.timeline);
ui.showAll.addEventListener('change', () => timeline.showAll(ui.showAll.checked));
ui.tokenField.addEventListener('submit', (e) => {
  e.preventDefault();
  if (!isLive(call.state)) call.connect().catch(() => {});
});
ui.token.value = loadToken();
ui.token.addEventListener('input', () => {
  saveToken(ui.token.value.trim());
  controls.clearAuthProblem();
});
// Any gesture on the page may start audio that autoplay held back.
const gesture = () => {
  if (audio.held()) audio.unlock();
};
document.addEventListener('pointerdown', gesture, true);
document.addEventListener('keydown', gesture, true);

window.holdline = {
  get state() { return call.state; },
  get sessionId() { return call.sessionId; },
  get resumed() { return call.resumed; },
  get events() { return store.events; },
  get levelLog() { return meters.levelLog; },
  // The live RTCPeerConnection, for getStats() from tests and debugging.
  get pc() { return call.pc; },
  // The data channel, for tests that send what the page itself would not.
  get channel() { return call.channel; },
  get muted() { return audio.muted; },
  set muted(m) { audio.setMuted(m); },
  levels() { return meters.levels(); },
  connect: () => call.connect(),
  disconnect: () => call.disconnect(),
  setMuted: (m) => audio.setMuted(m),
  sendText: (s) => call.sendText(s),
  _ingest: ingest,
};

audio.setMuted(false);
call.setState('idle', 'Loading…');

configReady = (async () => {
  try {
    const res = await fetch('/v1/config', { cache: 'no-store' });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    const c = await res.json();
    Object.assign(config, c || {});
    controls.setAgent(config.agent);
    if (config.auth_required) controls.showTokenField(false);
    if (call.state === 'idle') call.setState('idle');
  } catch (e) {
    if (call.state === 'idle') controls.setStatus(`Could not load the server configuration (${e.message}).`, 'error');
  }
})();

configReady.then(() => {
  if (isLive(call.state)) return;
  // A reload mid-call takes the call back; ?autoconnect=1 starts one.
  if (loadResume() || AUTOCONNECT) {
    call.connect().catch(() => {});
    audio.checkSoundSoon();
  }
});

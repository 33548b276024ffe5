// The call's connection and its life: connect (or resume the session this
// tab had) over peer.js's peer connection, take a lost call back within
// the session's resume window, follow a draining server's move to
// another, and end the call. Owns the call state
// (idle, connecting, connected, resuming, reconnecting, ended, error).

import { clearResume, loadResume, saveResume } from './storage.js';
import {
  afterFailedConnect, afterFailedResume, cancelled, idFromLocation, isLive, moveLocation, resumeTtlMs, retryDelayMs,
} from './connection-rules.js';
import { DELETE_TIMEOUT_MS, createPeer } from './peer.js';
import { DEFAULT_STATUS } from './controls.js';

// A connection "disconnected" this long counts as lost; it often comes back.
const DISCONNECTED_GRACE_MS = 3000;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// createConnection: page holds what the connection works with —
//   config, whenConfigured()  the server's configuration, and its loading
//   relayOnly                 media only through TURN
//   authHeaders()             the access token's header
//   afterSeq()                the last event seen, for the server to resend what follows
//   onMessage(msg)            each data-channel message
//   audio, controls, transcript, timeline, resetSession()  the page's parts
export function createConnection(page) {
  const { config, audio, controls, transcript, timeline } = page;

  let state = 'idle';
  let sessionId = null;
  let resumed = false;
  let sessionOver = false;
  let userStopped = false;

  const peer = createPeer({
    config,
    relayOnly: page.relayOnly,
    authHeaders: page.authHeaders,
    audio,
    afterSeq: page.afterSeq,
    onMessage: page.onMessage,
    onConnectionState,
    onChannelClosed,
    stopped: () => userStopped,
    changed: () => refresh(),
  });
  let inFlight = null;
  let reconnecting = false;
  let lossStart = null;
  let disconnectTimer = null;
  const waiters = [];

  function refresh() {
    controls.update({ live: isLive(state), resumable: !!loadResume(), open: peer.open(), sessionId });
    audio.updateSoundButton();
  }

  function setState(s, message, tone) {
    state = s;
    controls.showState(s, message, tone);
    refresh();
    if (s === 'connected') settleWaiters(null);
    else if (s === 'ended' || s === 'error') settleWaiters(new Error(message || DEFAULT_STATUS[s]));
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

  // attempt offers on a new peer connection, resuming with token when
  // given, and resolves once the call is up.
  function attempt(token) {
    clearTimeout(disconnectTimer);
    return peer.attempt(token, answered);
  }

  // answered takes the session the server answered with: where to resume
  // it, whether it was resumed, and which it is.
  function answered(res) {
    controls.clearAuthProblem();
    const loc = res.headers.get('Location');
    const token = res.headers.get('Holdline-Resume-Token');
    if (loc) saveResume({ location: loc, token: token || null });
    resumed = res.headers.get('Holdline-Session-Resumed') === 'true';
    const id = idFromLocation(loc, location.href);
    if (id && sessionId && id !== sessionId) page.resetSession();
    if (id) sessionId = id;
    if (resumed) timeline.addLocal('resumed', 'Resumed session', 'ok');
  }

  function noteLoss() {
    if (lossStart == null) lossStart = performance.now();
  }

  function onConnectionState(conn, myGen) {
    if (!peer.isCurrent(myGen)) return;
    const s = conn.connectionState;
    if (s === 'connected') {
      clearTimeout(disconnectTimer);
      lossStart = null;
    } else if (s === 'disconnected') {
      noteLoss();
      clearTimeout(disconnectTimer);
      disconnectTimer = setTimeout(() => {
        if (peer.isCurrent(myGen) && conn.connectionState === 'disconnected') onConnectionLost();
      }, DISCONNECTED_GRACE_MS);
    } else if (s === 'failed') {
      noteLoss();
      onConnectionLost();
    }
  }

  function onChannelClosed() {
    noteLoss();
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
    saveResume({ location: moveLocation(loadResume(), sessionId), token });
    lossStart = performance.now();
    reconnectLoop('Moving to another server…');
  }

  async function reconnectLoop(why) {
    if (reconnecting) return;
    reconnecting = true;
    const started = lossStart != null ? lossStart : performance.now();
    const ttl = resumeTtlMs(config);
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
          const verdict = afterFailedResume(e, performance.now() - started, ttl);
          if (verdict !== 'retry') {
            giveUp(verdict, e);
            return;
          }
          setState('reconnecting', `Connection lost. Reconnecting… (${e.message})`, 'warn');
          await sleep(retryDelayMs(performance.now() - t0));
        }
      }
    } finally {
      reconnecting = false;
      lossStart = null;
    }
  }

  // giveUp ends the try to connect by connection-rules.js's verdict on
  // the error that ended it.
  function giveUp(verdict, e) {
    switch (verdict) {
      case 'gone':
        sessionGone();
        break;
      case 'expired':
        sessionGone('Could not reconnect in time. The conversation has ended.');
        break;
      case 'auth':
        setState('error', controls.authProblem(e));
        break;
      default:
        setState('error', e.message || String(e));
    }
  }

  function setConnected() {
    lossStart = null;
    setState('connected', resumed ? 'Connected. Your conversation was resumed.' : DEFAULT_STATUS.connected);
    audio.checkSoundSoon();
    controls.focusComposer();
  }

  // endCall lets go of everything of the call but the page's record of it.
  function endCall() {
    sessionOver = true;
    peer.retire();
    clearTimeout(disconnectTimer);
    clearResume();
    audio.stopMic();
  }

  function sessionGone(message) {
    endCall();
    peer.close(peer.pc, peer.channel);
    setState('ended', message || 'The previous conversation has ended.', 'warn');
  }

  // endedByServer: the session_ended event came.
  function endedByServer(reason) {
    const conn = peer.pc;
    const channel = peer.channel;
    endCall();
    transcript.hideHearing();
    if (conn) peer.closeLater(conn, channel);
    setState('ended', reason ? `The conversation has ended (${reason}).` : 'The conversation has ended.');
  }

  function connect() {
    // Runs synchronously inside the click: the audio context is allowed to start.
    audio.ensureContext();
    if (state === 'connected') return Promise.resolve();
    if (inFlight) return inFlight;
    if (reconnecting) return whenConnected();

    const startGen = peer.gen;
    const run = (async () => {
      await page.whenConfigured();
      if (!peer.isCurrent(startGen)) throw cancelled(); // stopped while the configuration loaded
      if (state === 'connected') return;
      sessionOver = false;
      userStopped = false;
      const r = loadResume();
      const resuming = !!(r && r.token);
      if (resuming) {
        setState('resuming');
      } else {
        clearResume();
        page.resetSession();
        sessionId = null;
        resumed = false;
        setState('connecting');
      }
      await audio.ensureMic();
      if (userStopped) {
        audio.stopMic();
        throw cancelled();
      }
      try {
        await attempt(resuming ? r.token : null);
      } catch (e) {
        if (e.cancelled) throw e;
        giveUp(afterFailedConnect(e, resuming), e);
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
    peer.retire();
    clearTimeout(disconnectTimer);
    const r = loadResume();
    const conn = peer.pc;
    const channel = peer.channel;
    clearResume();
    audio.stopMic();
    transcript.setHearing('');
    // Nothing more of this call will arrive: what the agent was saying
    // stops where the caller stopped hearing it.
    transcript.closeOpen('call ended');
    if (r || conn) timeline.addLocal('call_ended', 'You ended the call', 'session');
    setState('ended', 'Conversation ended.');
    if (conn) peer.closeLater(conn, channel);
    try {
      if (r && r.location) {
        const ctl = new AbortController();
        const timer = setTimeout(() => ctl.abort(), DELETE_TIMEOUT_MS);
        try {
          await fetch(r.location, { method: 'DELETE', headers: page.authHeaders(), signal: ctl.signal });
        } finally {
          clearTimeout(timer);
        }
      }
    } catch (_) {
      // The session times out on the server anyway.
    } finally {
      peer.close(conn, channel);
    }
  }

  function sendText(s) {
    const text = String(s == null ? '' : s).trim();
    if (!text || !peer.open()) return false;
    peer.channel.send(JSON.stringify({ type: 'text', text }));
    transcript.addTyped(text);
    return true;
  }

  // adoptSession takes what the server's session message says of the
  // session: its id, and whether it was resumed.
  function adoptSession(msg) {
    if (msg.id) sessionId = msg.id;
    controls.showLanesLink(sessionId);
    if (typeof msg.resumed === 'boolean') resumed = msg.resumed;
  }

  return {
    get state() { return state; },
    get sessionId() { return sessionId; },
    get resumed() { return resumed; },
    get pc() { return peer.pc; },
    get channel() { return peer.channel; },
    setState, refresh, connect, disconnect, sendText, moveTo, endedByServer, adoptSession,
  };
}

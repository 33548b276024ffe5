// The call's one peer connection and data channel at a time: making an
// offer on a new one, retiring the old one so that nothing it still says
// is heard, and closing it. What an answer means for the session, and
// when to try again, is connection.js's.

import { HttpError, cancelled } from './connection-rules.js';
import { gatheringComplete, postOffer, rtcConfiguration } from './offer.js';

const OPEN_TIMEOUT_MS = 20000;
// Ending a call keeps the connection up this long for the server to hear
// of it by the DELETE rather than by a dropped transport.
export const DELETE_TIMEOUT_MS = 3000;

// createPeer: call holds what a connection works with —
//   config, relayOnly, authHeaders()  for the offer
//   audio                           the microphone to send, the speaker to play to
//   afterSeq()                      the last event seen, for the server to resend what follows
//   onMessage(msg)                  each data-channel message
//   onConnectionState(conn, gen)    the peer connection's state changed
//   onChannelClosed()               the current data channel closed
//   stopped()                       whether the caller ended the call
//   changed()                       the channel opened or went
export function createPeer(call) {
  let gen = 0; // bumps whenever the current peer connection is replaced or dropped
  let cancelCurrent = () => {};
  let pc = null;
  let dc = null;

  // retire lets go of the current peer connection: its callbacks go quiet
  // and an attempt still under way rejects as cancelled.
  function retire() {
    gen++;
    const cancel = cancelCurrent;
    cancelCurrent = () => {};
    cancel();
  }

  function forget(conn) {
    if (pc === conn) {
      pc = null;
      dc = null;
      call.audio.detachRemote();
    }
  }

  function close(conn, channel) {
    if (channel) { try { channel.close(); } catch (_) { /* closed */ } }
    if (conn) { try { conn.close(); } catch (_) { /* closed */ } }
    forget(conn);
  }

  // closeLater lets go of the connection now but closes it only once the
  // server has had time to hear the call end.
  function closeLater(conn, channel) {
    forget(conn);
    setTimeout(() => close(conn, channel), DELETE_TIMEOUT_MS + 500);
    call.changed();
  }

  function channelOpened(conn, channel, myGen) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('Timed out waiting for the connection')), OPEN_TIMEOUT_MS);
      channel.onopen = () => {
        clearTimeout(timer);
        if (myGen !== gen) { reject(cancelled()); return; }
        channel.send(JSON.stringify({ type: 'hello', after: call.afterSeq() }));
        resolve();
      };
      channel.onclose = () => {
        clearTimeout(timer);
        reject(new Error('The connection closed'));
        if (myGen === gen) call.onChannelClosed();
      };
      conn.addEventListener('connectionstatechange', () => {
        if (conn.connectionState === 'failed' || conn.connectionState === 'closed') {
          clearTimeout(timer);
          reject(new Error('The connection failed'));
        }
      });
    });
  }

  // attempt makes one offer on a new peer connection (resuming with token
  // when given) and resolves once the data channel is open. answered(res)
  // hears the server's answer before the connection is made with it.
  async function attempt(resumeToken, answered) {
    retire();
    const myGen = gen;
    // A closed peer connection abandons its pending operations without
    // settling them, so every wait below also ends when the attempt is
    // superseded or stopped.
    const stopped = new Promise((_, reject) => { cancelCurrent = () => reject(cancelled()); });
    stopped.catch(() => {});
    const step = (p) => Promise.race([p, stopped]);
    close(pc, dc);

    const conn = new RTCPeerConnection(await step(rtcConfiguration(call.config, call.authHeaders(), call.relayOnly)));
    const channel = conn.createDataChannel('holdline', { ordered: true });
    pc = conn;
    dc = channel;
    const mic = call.audio.micTrack;
    if (mic && mic.readyState === 'live') {
      conn.addTransceiver(mic, { direction: 'sendrecv' });
    } else {
      conn.addTransceiver('audio', { direction: 'sendrecv' });
    }
    conn.ontrack = (e) => { if (myGen === gen) call.audio.playRemote(e); };
    conn.addEventListener('connectionstatechange', () => call.onConnectionState(conn, myGen));
    channel.onmessage = (e) => {
      if (myGen !== gen) return;
      let msg;
      try { msg = JSON.parse(e.data); } catch (_) { return; }
      call.onMessage(msg);
    };
    const opened = channelOpened(conn, channel, myGen);
    opened.catch(() => {});

    try {
      const offer = await step(conn.createOffer());
      await step(conn.setLocalDescription(offer));
      await step(gatheringComplete(conn));
      if (myGen !== gen) throw cancelled();

      const { res, body } = await postOffer(conn.localDescription.sdp, call.authHeaders(), resumeToken);
      if (myGen !== gen) {
        // Stopped while the offer was in flight: end the session it made.
        const loc = res.ok && call.stopped() ? res.headers.get('Location') : null;
        if (loc) fetch(loc, { method: 'DELETE', headers: call.authHeaders() }).catch(() => {});
        throw cancelled();
      }
      if (!res.ok) throw new HttpError(res.status, body.trim() || res.statusText || `HTTP ${res.status}`, res.headers.get('WWW-Authenticate'));
      answered(res);

      await step(conn.setRemoteDescription({ type: 'answer', sdp: body }));
      await step(opened);
      if (myGen !== gen) throw cancelled();
    } catch (e) {
      if (myGen !== gen) throw e.cancelled ? e : cancelled(); // replaced or stopped meanwhile
      retire();
      close(conn, channel);
      throw e;
    }
  }

  return {
    attempt, retire, close, closeLater,
    isCurrent(g) { return g === gen; },
    get gen() { return gen; },
    get pc() { return pc; },
    get channel() { return dc; },
    open() { return !!dc && dc.readyState === 'open'; },
  };
}

// One WebRTC offer to the server, WHIP-style: the ICE servers to use, the
// wait for ICE gathering (the offer is not trickled), and the POST that
// carries the offer and returns the answer.

import { HttpError } from './connection-rules.js';

const ICE_GATHER_TIMEOUT_MS = 3000;

// gatheringComplete waits for the connection's candidates, or a few
// seconds: an offer with the candidates so far beats none.
export function gatheringComplete(conn) {
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

// rtcConfiguration is the peer connection's configuration: the STUN and
// TURN servers the server names. TURN credentials are minted per request
// and expire, and are given only with the token, so they are asked for
// again at each connection when there may be any. relayOnly sends media
// only through TURN.
export async function rtcConfiguration(config, authHeaders, relayOnly) {
  let servers = config.ice_servers || [];
  if (config.auth_required || servers.some((s) => s.credential)) {
    try {
      const res = await fetch('/v1/config', { headers: authHeaders, cache: 'no-store' });
      const c = res.ok ? await res.json() : null;
      if (c && Array.isArray(c.ice_servers)) servers = c.ice_servers;
    } catch (_) { /* keep the servers the page loaded with */ }
  }
  const cfg = { iceServers: servers };
  if (relayOnly) cfg.iceTransportPolicy = 'relay';
  return cfg;
}

// postOffer sends the offer, resuming the session of resumeToken when
// given, and returns the response and its body (the answer, or why not).
export async function postOffer(sdp, authHeaders, resumeToken) {
  const headers = { 'Content-Type': 'application/sdp', ...authHeaders };
  if (resumeToken) headers['Holdline-Resume-Token'] = resumeToken;
  let res;
  try {
    res = await fetch('/v1/sessions', { method: 'POST', headers, body: sdp, cache: 'no-store' });
  } catch (_) {
    throw new HttpError(0, 'Cannot reach the server');
  }
  return { res, body: await res.text() };
}

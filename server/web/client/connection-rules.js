// The connection's decisions, apart from the connection: which states are
// a call under way, what a refused offer means, when a lost call is given
// up on and how soon the next try goes. No network or DOM here.

// The states in which a call is under way (Connect is off).
const LIVE_STATES = new Set(['connecting', 'connected', 'resuming', 'reconnecting']);

export function isLive(state) {
  return LIVE_STATES.has(state);
}

// How long a lost call is tried again when the server does not say.
export const DEFAULT_RESUME_TTL_MS = 120000;
// Tries to resume go no more often than this.
export const RECONNECT_INTERVAL_MS = 2000;

// An HTTP answer that refused the offer; status 0 is no answer at all. A
// 401 says whether the token was missing or wrong (auth).
export class HttpError extends Error {
  constructor(status, message, challenge) {
    super(message);
    this.name = 'HttpError';
    this.status = status;
    if (status === 401) this.auth = tokenProblem(challenge);
  }
}

// tokenProblem reads a 401's WWW-Authenticate: RFC 6750 puts an error=
// in it only when a token was sent, so without one the token is missing.
export function tokenProblem(challenge) {
  return /error="?[a-z_]+/i.test(challenge || '') ? 'wrong' : 'missing';
}

export function cancelled() {
  const e = new Error('Cancelled');
  e.cancelled = true;
  return e;
}

// idFromLocation is the session id at the end of a session's Location.
export function idFromLocation(loc, base) {
  if (!loc) return null;
  try {
    const parts = new URL(loc, base).pathname.split('/').filter(Boolean);
    return parts.length ? decodeURIComponent(parts[parts.length - 1]) : null;
  } catch (_) {
    return null;
  }
}

export function resumeTtlMs(config) {
  const ttl = Number(config && config.resume_ttl_ms);
  return ttl > 0 ? ttl : DEFAULT_RESUME_TTL_MS;
}

// sessionGoneStatus: the server no longer has the session (404, 410).
function sessionGoneStatus(status) {
  return status === 404 || status === 410;
}

// afterFailedConnect says what a failed first offer (or resume from a
// page load) means: 'gone' when the session to resume is no more,
// 'auth' for a token refused, else 'error'.
export function afterFailedConnect(e, resuming) {
  if (resuming && sessionGoneStatus(e.status)) return 'gone';
  return e.status === 401 ? 'auth' : 'error';
}

// afterFailedResume says what a failed try to take a lost call back
// means: 'gone', 'auth', 'expired' once the session's resume window has
// passed since the loss, or 'retry'.
export function afterFailedResume(e, sinceLossMs, ttlMs) {
  if (sessionGoneStatus(e.status)) return 'gone';
  if (e.status === 401) return 'auth';
  if (sinceLossMs > ttlMs) return 'expired';
  return 'retry';
}

// retryDelayMs is the wait before the next try, which took tookMs.
export function retryDelayMs(tookMs) {
  return Math.max(0, RECONNECT_INTERVAL_MS - tookMs);
}

// moveLocation is where a moved session is resumed: where it was, or
// else its path by id.
export function moveLocation(resume, sessionId) {
  return (resume && resume.location) || (sessionId ? `/v1/sessions/${sessionId}` : '');
}

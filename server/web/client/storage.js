// What the web client keeps in the tab between page loads: the session to
// resume (its location and resume token) and the access token.

const RESUME_KEY = 'holdline.resume';
const TOKEN_KEY = 'holdline.token';

// parseResume reads a stored resume record; anything without a location
// is no record at all.
export function parseResume(raw) {
  if (!raw) return null;
  try {
    const r = JSON.parse(raw);
    return r && typeof r.location === 'string' ? r : null;
  } catch (_) {
    return null;
  }
}

export function loadResume() {
  try {
    return parseResume(sessionStorage.getItem(RESUME_KEY));
  } catch (_) {
    return null;
  }
}

export function saveResume(r) {
  try { sessionStorage.setItem(RESUME_KEY, JSON.stringify(r)); } catch (_) { /* storage off */ }
}

export function clearResume() {
  try { sessionStorage.removeItem(RESUME_KEY); } catch (_) { /* storage off */ }
}

// The access token is kept for this tab only (sessionStorage): it goes
// with the tab, and is not left behind for whoever uses the browser next.
export function loadToken() {
  try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch (_) { return ''; }
}

export function saveToken(t) {
  try {
    if (t) sessionStorage.setItem(TOKEN_KEY, t); else sessionStorage.removeItem(TOKEN_KEY);
  } catch (_) { /* storage off */ }
}

// Earlier versions kept the token in localStorage, for good: forget it.
export function forgetLegacyToken() {
  try { localStorage.removeItem(TOKEN_KEY); } catch (_) { /* storage off */ }
}

// bearer is the Authorization header for a token, or none without one.
export function bearer(token) {
  const t = (token || '').trim();
  return t ? { Authorization: `Bearer ${t}` } : {};
}

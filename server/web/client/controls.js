// The page's status line and controls: what the buttons and the message
// box allow in each call state, the agent's name, the link to the lanes
// view, and the access-token field with what is wrong with the token.

export const DEFAULT_STATUS = {
  idle: 'Ready. Press Connect to start talking.',
  connecting: 'Connecting…',
  connected: 'Connected. Speak, or type a message.',
  resuming: 'Resuming your conversation…',
  reconnecting: 'Connection lost. Reconnecting…',
  ended: 'Conversation ended.',
  error: 'Something went wrong.',
};

// A refused token: 'missing' (none sent) or 'wrong' (sent, not this
// server's), from the 401's WWW-Authenticate (RFC 6750: error= only
// when a token came). The field says which until the token is edited.
const AUTH_MESSAGES = {
  missing: 'This server needs an access token: paste it above, then Connect.',
  wrong: 'That access token does not match this server\'s: check it, then Connect.',
};

export function createControls(ui) {
  function setStatus(text, tone) {
    ui.status.textContent = text;
    if (tone) ui.status.dataset.tone = tone; else delete ui.status.dataset.tone;
  }

  // showState puts the call state on the page: body[data-state] for the
  // styles, and the status line, its default wording unless given.
  function showState(s, message, tone) {
    document.body.dataset.state = s;
    setStatus(message || DEFAULT_STATUS[s] || s, tone || (s === 'error' ? 'error' : ''));
  }

  // update enables what the call allows: {live, resumable, open, sessionId}.
  function update({ live, resumable, open, sessionId }) {
    ui.connect.disabled = live;
    ui.connect.textContent = resumable && !live ? 'Reconnect' : 'Connect';
    ui.disconnect.disabled = !(live || resumable);
    ui.text.disabled = !open;
    ui.send.disabled = !open;
    showLanesLink(sessionId);
  }

  // The session's lanes view (/sessions/{id}) draws the same events as
  // lanes on a time axis, in a tab of its own.
  function showLanesLink(sessionId) {
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

  // authProblem shows what is wrong with the token of a 401 (an HttpError)
  // by the field, and returns the same words for the status line.
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

  // focusComposer puts the cursor in the message box on devices with a
  // pointer, where that does not pop a keyboard over the page.
  function focusComposer() {
    if (!ui.text.matches(':focus') && window.matchMedia('(hover: hover)').matches) {
      ui.text.focus({ preventScroll: true });
    }
  }

  return { setStatus, showState, update, showLanesLink, setAgent, showTokenField, authProblem, clearAuthProblem, focusComposer };
}

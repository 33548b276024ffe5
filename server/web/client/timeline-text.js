// What the client page's timeline says about each event: its label, tone
// and detail line, and the state a tool call's card shows. No DOM here,
// so that the wording and the tool states can be tested on their own.

// Kinds hidden from the timeline unless "show all" is ticked.
export const NOISY = new Set(['speech_started', 'speech_stopped', 'idle', 'turn_started',
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

// A tool call's events share one card; each is a step labelled so.
export const TOOL_STEPS = {
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

// The card's state while the call is under way, by the step that set it.
const TOOL_CHIP = {
  tool_requested: 'requested',
  tool_deferred: 'deferred',
  tool_started: 'started',
  tool_cancel_requested: 'cancelling',
};

const TERMINAL = new Set(['succeeded', 'failed', 'cancelled', 'timed_out', 'unknown']);

export function isToolEvent(ev) {
  return ev.kind in TOOL_STEPS && !!ev.call_id;
}

export function fmtTime(atNs) {
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

// silentCut: a turn cut before any of it was played (the caller left,
// or spoke, while the agent was still thinking). Nothing was cut off the
// caller's hearing; turn_interrupted already says why the turn stopped.
// A reload while the agent thinks makes one: shown as "Agent cut off"
// it was an empty line.
function silentCut(ev) {
  return ev.kind === 'playout_truncated' && !ev.text && !(ev.played_ns > 0);
}

// describe is an event's timeline entry: {label, tone, detail, noisy}.
export function describe(ev) {
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
  return { label, tone, detail, noisy: NOISY.has(ev.kind) };
}

// toolStateAfter is the state a tool card shows once ev has happened to a
// card showing current. An outcome, once shown, is not taken back by a
// step of the call that arrives late.
export function toolStateAfter(current, ev) {
  const finished = TERMINAL.has(current);
  switch (ev.kind) {
    case 'tool_requested':
    case 'tool_deferred':
    case 'tool_started':
      if (finished) return current;
      return ev.state && ev.state !== 'running' ? ev.state : TOOL_CHIP[ev.kind];
    case 'tool_cancel_requested':
      return finished ? current : 'cancelling';
    case 'tool_terminal':
    case 'tool_deduped':
    case 'tool_committed':
      return ev.state || current;
    default:
      return current;
  }
}

// lateOutcome is the note a card gets for an outcome that came after the
// call was given up on, or '' for none.
export function lateOutcome(ev) {
  return ev.kind === 'tool_late_outcome' && ev.state ? `late: ${ev.state.replace(/_/g, ' ')}` : '';
}

export function toolStepDetail(ev) {
  if (ev.kind === 'tool_deduped') return join(ev.reason, ev.text && `of ${ev.text}`);
  if (ev.kind === 'tool_reconcile') return join(ev.reason, ev.text && `earlier ${ev.text}`);
  return join(ev.state, ev.reason, ev.error);
}

// chipClass is the class list of a state chip: the state, stripped to
// what a class name may hold.
export function chipClass(state) {
  return `chip state-${state.replace(/[^a-z_]/gi, '')}`;
}

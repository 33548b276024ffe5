// What the timeline panel says of events, and the state of a tool call's card.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  chipClass, describe, fmtTime, isToolEvent, lateOutcome, toolStateAfter, toolStepDetail,
} from '../web/client/timeline-text.js';

test('times are seconds on the session clock', () => {
  assert.equal(fmtTime(1234567890), '1.23s');
  assert.equal(fmtTime(0), '0.00s');
  assert.equal(fmtTime(null), '–');
  assert.equal(fmtTime(Infinity), '–');
});

test('events are labelled, toned and detailed by kind', () => {
  assert.deepEqual(describe({ kind: 'user_turn', text: 'Two at seven', reason: 'injected' }),
    { label: 'Caller turn', tone: 'user', detail: '“Two at seven” · typed', noisy: false });
  assert.deepEqual(describe({ kind: 'transcript', text: 'two', final: false }),
    { label: 'Heard', tone: 'user', detail: '“two” · partial', noisy: true });
  assert.equal(describe({ kind: 'playout_done', text: 'Booked.', played_ns: 1.26e9 }).detail, '“Booked.” · 1.3 s played');
  assert.equal(describe({ kind: 'provider_error', provider: 'openai', error: 'timeout' }).detail, 'openai: timeout');
  assert.equal(describe({ kind: 'provider_failover', reason: 'slow' }).detail, 'slow');
  assert.equal(describe({ kind: 'events_dropped', count: 1 }).detail, '1 event not delivered');
  assert.equal(describe({ kind: 'events_dropped', count: 3 }).detail, '3 events not delivered');
  assert.deepEqual(describe({ kind: 'something_new', reason: 'r', state: 's' }),
    { label: 'something_new', tone: 'plain', detail: 'r · state s', noisy: false });
});

test('a turn cut before anything played is a quiet, noisy line, not a cut-off', () => {
  assert.deepEqual(describe({ kind: 'playout_truncated', text: '', played_ns: 0 }),
    { label: 'Agent turn dropped before speaking', tone: 'quiet', detail: 'nothing had played', noisy: true });
  assert.equal(describe({ kind: 'playout_truncated', text: '', played_ns: 5e8 }).label, 'Agent cut off');
  assert.equal(describe({ kind: 'playout_truncated', text: 'Sure', played_ns: 0 }).label, 'Agent cut off');
});

test('tool events with a call id go to the call\'s card', () => {
  assert.equal(isToolEvent({ kind: 'tool_started', call_id: 'c1' }), true);
  assert.equal(isToolEvent({ kind: 'tool_started' }), false);
  assert.equal(isToolEvent({ kind: 'user_turn', call_id: 'c1' }), false);
});

test('a tool card follows the call and keeps its outcome', () => {
  const run = (events) => events.reduce((state, ev) => toolStateAfter(state, ev), 'requested');
  assert.equal(run([{ kind: 'tool_deferred' }]), 'deferred');
  assert.equal(run([{ kind: 'tool_started', state: 'running' }]), 'started');
  assert.equal(run([{ kind: 'tool_started', state: 'awaiting_confirmation' }]), 'awaiting_confirmation');
  assert.equal(run([{ kind: 'tool_started' }, { kind: 'tool_cancel_requested' }]), 'cancelling');
  assert.equal(run([{ kind: 'tool_started' }, { kind: 'tool_terminal', state: 'succeeded' }]), 'succeeded');
  // A step that arrives after the outcome does not take it back...
  assert.equal(run([{ kind: 'tool_terminal', state: 'failed' }, { kind: 'tool_started' }]), 'failed');
  assert.equal(run([{ kind: 'tool_terminal', state: 'timed_out' }, { kind: 'tool_cancel_requested' }]), 'timed_out');
  // ...but the server's later word on the outcome does.
  assert.equal(run([{ kind: 'tool_terminal', state: 'unknown' }, { kind: 'tool_committed', state: 'succeeded' }]), 'succeeded');
  assert.equal(run([{ kind: 'tool_deduped' }]), 'requested', 'no state, no change');
  assert.equal(run([{ kind: 'tool_late_outcome', state: 'succeeded' }, { kind: 'tool_reconcile' }]), 'requested');
});

test('a tool card\'s notes and steps', () => {
  assert.equal(lateOutcome({ kind: 'tool_late_outcome', state: 'timed_out' }), 'late: timed out');
  assert.equal(lateOutcome({ kind: 'tool_late_outcome' }), '');
  assert.equal(lateOutcome({ kind: 'tool_terminal', state: 'failed' }), '');
  assert.equal(toolStepDetail({ kind: 'tool_deduped', reason: 'same args', text: 'c0' }), 'same args · of c0');
  assert.equal(toolStepDetail({ kind: 'tool_reconcile', text: 'c0' }), 'earlier c0');
  assert.equal(toolStepDetail({ kind: 'tool_terminal', state: 'failed', error: 'boom' }), 'failed · boom');
  assert.equal(chipClass('timed_out'), 'chip state-timed_out');
  assert.equal(chipClass('a"b c'), 'chip state-abc');
});

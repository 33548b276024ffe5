// The page's record of the session's events.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventStore, sessionStartWall } from '../web/client/events.js';

test('events are kept once each, in sequence order, however they arrive', () => {
  const s = new EventStore();
  for (const seq of [1, 2, 5, 3, 2, 4, 1]) s.add({ seq, kind: 'idle' });
  assert.deepEqual(s.events.map((e) => e.seq), [1, 2, 3, 4, 5]);
  assert.equal(s.lastSeq, 5);
  assert.deepEqual(s.add({ seq: 3 }), { added: false, clockLearned: false });
  assert.equal(s.add({ kind: 'no seq' }).added, false);
  assert.equal(s.add(null).added, false);
});

test('the session clock is learned from the first event that carries both times', () => {
  const s = new EventStore();
  assert.equal(s.sessionTime(Date.parse('2026-01-01T00:00:01Z')), null);
  assert.deepEqual(s.add({ seq: 1, at_ns: 0 }), { added: true, clockLearned: false });
  assert.deepEqual(s.add({ seq: 2, at_ns: 2e9, time: '2026-01-01T00:00:02Z' }), { added: true, clockLearned: true });
  assert.equal(s.startWall, Date.parse('2026-01-01T00:00:00Z'));
  assert.equal(s.add({ seq: 3, at_ns: 3e9, time: '2026-01-01T00:00:09Z' }).clockLearned, false, 'learned once');
  assert.equal(s.sessionTime(Date.parse('2026-01-01T00:00:01.5Z')), 1.5e9);
  assert.equal(s.sessionTime(Date.parse('2025-12-31T23:59:59Z')), 0, 'never before the start');
  s.reset();
  assert.equal(s.startWall, null);
  assert.equal(s.lastSeq, 0);
  assert.equal(s.events.length, 0);
});

test('an event without a parsable time teaches nothing', () => {
  assert.equal(sessionStartWall({ at_ns: 1, time: 'yesterday' }), null);
  assert.equal(sessionStartWall({ time: '2026-01-01T00:00:00Z' }), null);
  assert.equal(sessionStartWall({ at_ns: 1e6, time: '2026-01-01T00:00:00Z' }), Date.parse('2026-01-01T00:00:00Z') - 1);
});

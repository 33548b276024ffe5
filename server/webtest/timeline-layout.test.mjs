// The lanes view's layout: stages, lanes, spans and row packing, without a page.
import { test } from 'node:test';
import assert from 'node:assert/strict';

// A classic script, shared with holdline inspect's inlined page: it
// defines the layout on the global object.
await import('../web/timeline-layout.js');
const { tickStep, stagesOf, voiceToVoice, order, layout, pack, toneOf } = globalThis.HoldlineTimelineLayout;

const ms = 1e6;
const x = (ns) => ns / ms; // one px per millisecond

test('ticks are at least 90 px apart, on round steps', () => {
  assert.equal(tickStep(1000), 0.1);
  assert.equal(tickStep(360), 0.25);
  assert.equal(tickStep(90), 1);
  assert.equal(tickStep(89), 2);
  assert.equal(tickStep(2), 60);
  assert.equal(tickStep(0.01), 3600);
});

test('a turn\'s stages come in the order reached, a late endpoint named for what it waited on', () => {
  const plain = stagesOf({ speech_end_ns: 100, endpoint_ns: 300, first_token_ns: 500, first_played_ns: 900 });
  assert.deepEqual(plain.map((s) => [s.key, s.step]),
    [['speech_end_ns', ''], ['endpoint_ns', 'endpointing'], ['first_token_ns', 'model'], ['first_played_ns', 'line']]);
  // A speculative answer: the model is asked before the endpoint.
  const speculative = stagesOf({ speech_end_ns: 100, request_ns: 150, endpoint_ns: 400 });
  assert.deepEqual(speculative.map((s) => [s.key, s.step]),
    [['speech_end_ns', ''], ['request_ns', 'to request'], ['endpoint_ns', 'to endpoint']]);
  assert.deepEqual(stagesOf({ speech_end_ns: 0, endpoint_ns: -1 }), [], 'stages not reached are left out');
  assert.deepEqual(stagesOf(null), []);
});

test('voice-to-voice runs from the caller\'s last word to the agent\'s first sound', () => {
  assert.equal(voiceToVoice({ speech_end_ns: 100, first_played_ns: 700 }), 600);
  assert.equal(voiceToVoice({ first_played_ns: 700 }), null, 'a typed turn has none');
  assert.equal(voiceToVoice(null), null);
});

test('events sort by time, then sequence', () => {
  const evs = [{ seq: 3, at_ns: 5 }, { seq: 2, at_ns: 5 }, { seq: 1, at_ns: 9 }, { seq: 4 }];
  assert.deepEqual(evs.sort(order).map((e) => e.seq), [4, 2, 3, 1]);
});

test('what lasts is a span to what ends it; what has not ended lasts to the end', () => {
  const evs = [
    { seq: 1, kind: 'speech_started', at_ns: 100 * ms },
    { seq: 2, kind: 'speech_stopped', at_ns: 400 * ms },
    { seq: 3, kind: 'playout_started', epoch: 1, at_ns: 500 * ms },
    { seq: 4, kind: 'playout_truncated', epoch: 1, at_ns: 800 * ms, text: 'Sure, I', played_ns: 300 * ms },
    { seq: 5, kind: 'transport_lost', at_ns: 900 * ms },
    { seq: 6, kind: 'mystery', at_ns: 950 * ms },
  ];
  const lanes = layout(evs, x, 1000 * ms);
  const speech = lanes.get('caller').find((it) => it.event.seq === 1);
  assert.equal(speech.shape, 'span');
  assert.equal(speech.x, 100);
  assert.equal(speech.w, 300);
  const play = lanes.get('agent').find((it) => it.event.seq === 3);
  assert.equal(play.w, 300);
  assert.equal(play.tone, 'cut');
  assert.match(play.label, /heard “Sure, I”/);
  const lost = lanes.get('errors').find((it) => it.event.seq === 5);
  assert.equal(lost.open, true);
  assert.equal(lost.w, 100, 'to the last instant known');
  assert.equal(lanes.get('other').length, 1, 'an unknown kind is kept, in Other');
  // Every event is in exactly one item.
  const all = [...lanes.values()].flat().map((it) => it.event.seq).sort();
  assert.deepEqual(all, [1, 2, 3, 4, 5, 6]);
});

test('a tool call is one span from its first event to its last', () => {
  const evs = [
    { seq: 1, kind: 'tool_requested', call_id: 'c1', tool: 'book', at_ns: 10 * ms },
    { seq: 2, kind: 'tool_started', call_id: 'c1', at_ns: 20 * ms },
    { seq: 3, kind: 'tool_terminal', call_id: 'c1', state: 'failed', at_ns: 70 * ms },
  ];
  const [call] = layout(evs, x, 100 * ms).get('tools');
  assert.equal(call.x, 10);
  assert.equal(call.w, 60);
  assert.equal(call.tone, 'warn', 'a call that did not succeed');
  assert.match(call.label, /^book c1: .* → failed$/);
  assert.deepEqual(call.steps.map((s) => s.x), [10, 60]);
});

test('packing puts an item on the first row free at its start, and drops labels past the last row', () => {
  const items = [{ x: 0, w: 50, label: '' }, { x: 30, w: 10, label: '' }, { x: 70, w: 0, label: '' }];
  assert.equal(pack(items), 2);
  assert.deepEqual(items.map((it) => it.row), [0, 1, 0]);
  // Ten labelled items at one instant: six rows with labels, the rest bare below.
  const crowd = Array.from({ length: 10 }, (_, i) => ({ x: 0, w: 0, label: `item ${i}` }));
  assert.equal(pack(crowd), 7);
  assert.equal(crowd.filter((it) => it.row === 6 && it.label === '' && it.unlabelled).length, 4);
});

test('tones follow the lane, with the exceptions a reader needs', () => {
  assert.equal(toneOf({ kind: 'user_turn' }), 'user');
  assert.equal(toneOf({ kind: 'transcript_ignored' }), 'quiet');
  assert.equal(toneOf({ kind: 'playout_truncated' }), 'cut');
  assert.equal(toneOf({ kind: 'transport_restored' }), 'quiet');
  assert.equal(toneOf({ kind: 'checkpoint_failed' }), 'warn');
  assert.equal(toneOf({ kind: 'mystery' }), 'plain');
});

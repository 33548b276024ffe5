// How captions, finished turns and typed messages merge in the transcript.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { captionShows, finishedWords, userTurnAction } from '../web/client/transcript-rules.js';

test('a caption starts a bubble only with words, and never reopens a finished turn', () => {
  assert.equal(captionShows(undefined, ''), false);
  assert.equal(captionShows(undefined, 'Hello'), true);
  assert.equal(captionShows({ final: false }, ''), true, 'an open turn may be emptied');
  assert.equal(captionShows({ final: false }, 'Hello there'), true);
  assert.equal(captionShows({ final: true }, 'Hello again'), false);
});

test('a finished turn keeps the played words, else the captions shown', () => {
  assert.equal(finishedWords(undefined, 'Table for two.', ''), 'Table for two.');
  assert.equal(finishedWords({ final: false }, 'Table for two.', 'Table for'), 'Table for two.');
  assert.equal(finishedWords({ final: false }, '', 'Table for'), 'Table for');
  assert.equal(finishedWords({ final: false }, '', ''), '');
  assert.equal(finishedWords(undefined, '', ''), '');
  assert.equal(finishedWords({ final: true }, 'late words', 'shown'), null);
});

test('a typed turn confirms the oldest waiting message; others add their own bubble', () => {
  assert.equal(userTurnAction({ reason: 'injected', text: 'hi' }, 1), 'confirm');
  assert.equal(userTurnAction({ reason: 'injected', text: '' }, 2), 'confirm');
  assert.equal(userTurnAction({ reason: 'injected', text: 'hi' }, 0), 'add', 'typed elsewhere, or before a reload');
  assert.equal(userTurnAction({ reason: 'endpoint', text: 'hello' }, 1), 'add', 'speech does not confirm typing');
  assert.equal(userTurnAction({ reason: 'endpoint', text: '' }, 0), 'none');
});

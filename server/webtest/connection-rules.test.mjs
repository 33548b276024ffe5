// The connection's decisions: resume, give up, retry, and what a refusal says.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  HttpError, afterFailedConnect, afterFailedResume, idFromLocation, isLive, moveLocation, resumeTtlMs,
  retryDelayMs, RECONNECT_INTERVAL_MS,
} from '../web/client/connection-rules.js';

test('a call is live from connecting until it ends', () => {
  for (const s of ['connecting', 'connected', 'resuming', 'reconnecting']) assert.equal(isLive(s), true, s);
  for (const s of ['idle', 'ended', 'error']) assert.equal(isLive(s), false, s);
});

test('a 401 says whether the token was missing or wrong', () => {
  assert.equal(new HttpError(401, 'no', 'Bearer realm="holdline"').auth, 'missing');
  assert.equal(new HttpError(401, 'no', '').auth, 'missing');
  assert.equal(new HttpError(401, 'no', null).auth, 'missing');
  assert.equal(new HttpError(401, 'no', 'Bearer realm="holdline", error="invalid_token"').auth, 'wrong');
  assert.equal(new HttpError(401, 'no', 'Bearer error=invalid_token').auth, 'wrong');
  assert.equal(new HttpError(503, 'busy').auth, undefined);
});

test('the session id is the last segment of its location', () => {
  const base = 'http://127.0.0.1:8080/';
  assert.equal(idFromLocation('/v1/sessions/s_123', base), 's_123');
  assert.equal(idFromLocation('http://other/v1/sessions/s%20x/', base), 's x');
  assert.equal(idFromLocation('', base), null);
  assert.equal(idFromLocation(null, base), null);
});

test('the resume window is the server\'s, or two minutes', () => {
  assert.equal(resumeTtlMs({ resume_ttl_ms: 5000 }), 5000);
  assert.equal(resumeTtlMs({ resume_ttl_ms: '7000' }), 7000);
  assert.equal(resumeTtlMs({ resume_ttl_ms: 0 }), 120000);
  assert.equal(resumeTtlMs({}), 120000);
  assert.equal(resumeTtlMs(null), 120000);
});

test('a failed resume is given up only when the session is gone, the token refused, or the window passed', () => {
  const ttl = 10000;
  assert.equal(afterFailedResume(new HttpError(404, 'gone'), 0, ttl), 'gone');
  assert.equal(afterFailedResume(new HttpError(410, 'gone'), 0, ttl), 'gone');
  assert.equal(afterFailedResume(new HttpError(401, 'no'), 0, ttl), 'auth');
  assert.equal(afterFailedResume(new HttpError(0, 'Cannot reach the server'), 9999, ttl), 'retry');
  assert.equal(afterFailedResume(new Error('The connection failed'), 10000, ttl), 'retry');
  assert.equal(afterFailedResume(new HttpError(503, 'draining'), 10001, ttl), 'expired');
  // A session the server no longer has is gone however early.
  assert.equal(afterFailedResume(new HttpError(404, 'gone'), 20000, ttl), 'gone');
});

test('a failed first offer is an error, but a resume of a session no more ends it', () => {
  assert.equal(afterFailedConnect(new HttpError(404, 'gone'), true), 'gone');
  assert.equal(afterFailedConnect(new HttpError(410, 'gone'), true), 'gone');
  assert.equal(afterFailedConnect(new HttpError(404, 'not found'), false), 'error');
  assert.equal(afterFailedConnect(new HttpError(401, 'no'), false), 'auth');
  assert.equal(afterFailedConnect(new HttpError(401, 'no'), true), 'auth');
  assert.equal(afterFailedConnect(new Error('Timed out waiting for the connection'), true), 'error');
});

test('tries go at most one per interval, a slow try going again at once', () => {
  assert.equal(retryDelayMs(0), RECONNECT_INTERVAL_MS);
  assert.equal(retryDelayMs(500), RECONNECT_INTERVAL_MS - 500);
  assert.equal(retryDelayMs(RECONNECT_INTERVAL_MS + 1), 0);
});

test('a move resumes where the session was, or at its path by id', () => {
  assert.equal(moveLocation({ location: '/v1/sessions/a', token: 't' }, 'b'), '/v1/sessions/a');
  assert.equal(moveLocation(null, 'b'), '/v1/sessions/b');
  assert.equal(moveLocation({ location: '' }, 'b'), '/v1/sessions/b');
  assert.equal(moveLocation(null, null), '');
});

// What the tab keeps between page loads.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bearer, parseResume } from '../web/client/storage.js';

test('a resume record needs a location', () => {
  assert.deepEqual(parseResume('{"location":"/v1/sessions/a","token":"t"}'), { location: '/v1/sessions/a', token: 't' });
  assert.equal(parseResume('{"token":"t"}'), null);
  assert.equal(parseResume('not json'), null);
  assert.equal(parseResume('null'), null);
  assert.equal(parseResume(''), null);
  assert.equal(parseResume(null), null);
});

test('a token goes as a bearer header, trimmed; no token, no header', () => {
  assert.deepEqual(bearer(' s3cret \n'), { Authorization: 'Bearer s3cret' });
  assert.deepEqual(bearer(''), {});
  assert.deepEqual(bearer('   '), {});
  assert.deepEqual(bearer(undefined), {});
});

// Levels, the mic meter and "Agent speaking".
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SpeakingDetector, meterFraction, rms, trimLevelLog } from '../web/client/levels.js';

test('rms of a block of samples', () => {
  assert.equal(rms(new Float32Array(8)), 0);
  assert.equal(rms(new Float32Array([0.5, -0.5, 0.5, -0.5])), 0.5);
  assert.equal(rms([]), 0);
});

test('the meter spans sixty decibels below full scale', () => {
  assert.equal(meterFraction(0), 0);
  assert.equal(meterFraction(0.001), 0);
  assert.equal(meterFraction(1), 1);
  assert.equal(meterFraction(2), 1);
  assert.ok(Math.abs(meterFraction(0.0316) - 0.5) < 0.01, '-30 dBFS is half way');
});

test('the level log keeps its window, trimmed a second at a time', () => {
  const log = [];
  for (let t = 0; t <= 5000; t += 10) log.push({ t });
  trimLevelLog(log, 5000, 4500);
  assert.equal(log.length, 501, 'oldest is not yet a second past the window');
  trimLevelLog(log, 5000, 3000);
  assert.equal(log[0].t, 2000);
  trimLevelLog([], 5000, 1000); // nothing to trim
});

test('the agent is speaking while loud and a hold after', () => {
  const d = new SpeakingDetector(0.01, 250);
  assert.equal(d.update(0, 0), false);
  assert.equal(d.update(10, 0.2), true);
  assert.equal(d.update(200, 0.001), true, 'a gap between words');
  assert.equal(d.update(260, 0.001), true);
  assert.equal(d.update(261, 0.001), false);
  assert.equal(d.update(300, 0.01), false, 'at the threshold is quiet');
});

// Sound levels, as numbers: the RMS of a block of samples, where a level
// sits on the mic meter, the rolling log of levels tests read, and when
// the agent counts as speaking. No audio or DOM here.

// A meter spans this many decibels below full scale.
const METER_DB = 60;

export function rms(samples) {
  let s = 0;
  for (let i = 0; i < samples.length; i++) s += samples[i] * samples[i];
  return samples.length ? Math.sqrt(s / samples.length) : 0;
}

// meterFraction is how full the meter is for a level: 0 at -60 dBFS and
// below, 1 at full scale.
export function meterFraction(level) {
  const db = 20 * Math.log10(Math.max(level, 1e-5));
  return Math.min(1, Math.max(0, (db + METER_DB) / METER_DB));
}

// trimLevelLog drops the entries older than windowMs before now, in
// place. It trims in batches, once the oldest entry is a second past the
// window, rather than shifting one entry out at every sample.
export function trimLevelLog(log, now, windowMs) {
  if (!log.length || log[0].t >= now - windowMs - 1000) return;
  let i = 0;
  while (i < log.length && log[i].t < now - windowMs) i++;
  log.splice(0, i);
}

// SpeakingDetector says whether the agent is speaking: loud above the
// threshold, and still speaking for holdMs after, so that the gaps
// between words do not flicker the indicator.
export class SpeakingDetector {
  constructor(threshold, holdMs) {
    this.threshold = threshold;
    this.holdMs = holdMs;
    this.lastLoud = -Infinity;
  }

  // update takes the level at time t (ms) and says whether speaking.
  update(t, level) {
    if (level > this.threshold) this.lastLoud = t;
    return t - this.lastLoud <= this.holdMs;
  }
}

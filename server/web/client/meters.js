// The level meters: samples the mic and the agent every few milliseconds,
// fills the mic meter, lights "Agent speaking", and keeps the last minute
// of levels for tests and debugging (window.holdline.levelLog).

import { FFT_SIZE } from './audio.js';
import { SpeakingDetector, meterFraction, rms, trimLevelLog } from './levels.js';

const SAMPLE_MS = 10;
const LEVEL_WINDOW_MS = 60000;
const SPEAKING_THRESHOLD = 0.01;
const SPEAKING_HOLD_MS = 250;

export function startMeters(ui, audio) {
  const levelLog = [];
  let last = { mic: 0, sent: 0, agent: 0 };
  const speaking = new SpeakingDetector(SPEAKING_THRESHOLD, SPEAKING_HOLD_MS);
  let speakingShown = false;
  const frame = new Float32Array(FFT_SIZE);

  function level(analyser) {
    if (!analyser) return 0;
    analyser.getFloatTimeDomainData(frame);
    return rms(frame);
  }

  function sample() {
    const t = performance.now();
    const mic = level(audio.micAnalyser);
    // What goes to the agent: nothing while muted, though the meter moves.
    const sent = audio.muted || !audio.micTrack ? 0 : mic;
    const agent = level(audio.agentAnalyser);
    last = { mic, sent, agent };
    levelLog.push({ t, mic, sent, agent });
    trimLevelLog(levelLog, t, LEVEL_WINDOW_MS);

    ui.micFill.style.transform = `scaleX(${meterFraction(mic).toFixed(3)})`;

    const on = speaking.update(t, agent);
    if (on !== speakingShown) {
      speakingShown = on;
      ui.speaking.dataset.on = String(on);
      ui.speaking.classList.toggle('on', on);
      ui.speakingText.textContent = on ? 'Agent speaking' : 'Agent quiet';
    }
  }

  setInterval(sample, SAMPLE_MS);
  return {
    levelLog,
    levels() { return { ...last }; },
  };
}

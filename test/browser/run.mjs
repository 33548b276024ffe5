// Drives the reference web client in Debian's Chromium with a fake
// microphone playing a WAV file, and prints what it measured as JSON.
//
//   node run.mjs booking URL CALLER.wav OUTDIR
//     connect, hear the greeting, speak the WAV's request, see it booked,
//     reload, resume, be answered again.
//   node run.mjs bargein URL WAIT.wav OUTDIR [TRIALS]
//     interrupt a long answer TRIALS times; time from the caller's speech
//     onset to the agent's audio stopping, both measured in the page.
//   node run.mjs backchannel URL SOUNDS.wav OUTDIR [TRIALS]
//     make a short sound (the WAV's next one) over a long answer TRIALS
//     times; count the answers cut, and measure at the page the gap from
//     the sound's end to the agent's voice and the longest silence.
//
//   node run.mjs relay URL CALLER.wav OUTDIR [SESSIONS]
//     with ?relay=1 (media only through the TURN servers the server
//     names): SESSIONS times, a new tab connects, hears the greeting
//     through a relayed candidate pair, and hangs up; the first one also
//     speaks the WAV's request and sees it booked.
//   node run.mjs move URL CALLER.wav OUTDIR WORKER
//     URL is a front door over two workers, WORKER the one the page lands
//     on: book by text, then drain WORKER (POST /v1/admin/drain with
//     $HOLDLINE_ADMIN_TOKEN); the page follows the move to the other
//     worker, which answers the next question without booking again.
//   node run.mjs page URL CALLER.wav OUTDIR TOKEN
//     on a server that wants TOKEN: the page tells a missing token from a
//     wrong one and keeps the right one for the tab only; typed text over
//     the server's limit is refused, not a turn; checkpoint lines show only
//     with "Show all"; a reload mid-answer leaves no empty "Agent cut off";
//     End call closes the agent's open bubble and logs the end.
//
// The WAV loops in Chrome's fake capture device; the page's mute button
// gates it, so the script decides when the caller speaks: it unmutes at the
// start of a silence in the file, and the next onset is a whole utterance.
import { chromium } from 'playwright-core';

const [scenario, url, wav, outDir, trialsArg] = process.argv.slice(2);
// The page scenario's fifth argument is the server's token.
const tokenArg = trialsArg;
const log = (...a) => console.error(`[${((Date.now() - t0) / 1000).toFixed(1)}s]`, ...a);
const t0 = Date.now();

const LOUD = 0.015; // RMS above which a level counts as sound

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: [
    '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
    // The relay scenario's browser is on a network of its own: gathering
    // on its loopback would wait out a TURN server it cannot reach there.
    ...(scenario === 'relay' ? [] : ['--allow-loopback-in-peer-connection']), '--use-fake-ui-for-media-stream',
    '--use-fake-device-for-media-stream', `--use-file-for-fake-audio-capture=${wav}`,
    '--autoplay-policy=no-user-gesture-required',
    // A server on another host than localhost (a test's network
    // namespace) serves the page over plain HTTP; the microphone still
    // needs a secure context.
    `--unsafely-treat-insecure-origin-as-secure=${url}`,
  ],
});
const result = { scenario };
let page;
try {
  page = await browser.newPage({ viewport: { width: 1280, height: 860 }, bypassCSP: true });
  page.on('console', (m) => { if (m.type() === 'error') log('page error:', m.text()); });
  page.on('pageerror', (e) => log('page exception:', e.message));
  await page.goto(`${url}/?aec=0${scenario === 'relay' ? '&relay=1' : ''}`);
  await page.waitForFunction(() => window.holdline && window.holdline.state === 'idle');
  if (scenario === 'booking') await booking();
  else if (scenario === 'relay') await relay(Number(trialsArg || 10));
  else if (scenario === 'bargein') await bargein(Number(trialsArg || 20));
  else if (scenario === 'backchannel') await backchannel(Number(trialsArg || 10));
  else if (scenario === 'page') await pageScenario(tokenArg);
  else if (scenario === 'move') await move(trialsArg);
  else throw new Error(`unknown scenario ${scenario}`);
  result.ok = true;
} catch (e) {
  result.ok = false;
  result.error = String(e && e.stack || e);
  if (page) {
    result.events = await page.evaluate(() => window.holdline && window.holdline.events.map((e) => `${e.seq} ${e.kind} ${e.text || ''} ${e.reason || ''} ${e.tool || ''} ${e.state || ''}`)).catch(() => null);
    await page.screenshot({ path: `${outDir}/${scenario}-failure.png`, fullPage: true }).catch(() => {});
  }
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(result) + '\n');

// ---------------------------------------------------------------- helpers

function waitEvent(pred, timeout = 30000, what = 'an event') {
  return page.waitForFunction(
    ([src]) => window.holdline.events.find(new Function('e', `return (${src})(e)`)),
    [pred.toString()], { timeout, polling: 20 },
  ).then((h) => h.jsonValue()).catch((e) => { throw new Error(`waiting for ${what}: ${e.message}`); });
}

function events() { return page.evaluate(() => window.holdline.events); }

function lastSeq() { return page.evaluate(() => window.holdline.events.reduce((m, e) => Math.max(m, e.seq), 0)); }

// waitSilenceStart resolves once the raw microphone, after sound, has been
// quiet for quietMs: inside the pause between two plays of the looping
// file, not in a gap between words. Quiet counts only while it is watched:
// when the page stalls (a loaded machine delays its timers) the levels in
// between were never seen, so the count starts again, and a stall over a
// gap between words cannot pass for the file's pause.
function waitSilenceStart(quietMs = 300, timeout = 15000) {
  return page.evaluate(([loud, quietMs, timeout]) => new Promise((resolve, reject) => {
    const maxGap = 40;
    let wasLoud = false, quietSince = 0, last = 0;
    const start = performance.now();
    const iv = setInterval(() => {
      const now = performance.now();
      const stalled = last && now - last > maxGap;
      last = now;
      const m = window.holdline.levels().mic;
      if (m > loud / 3) { wasLoud = wasLoud || m > loud; quietSince = 0; } else if (wasLoud) {
        if (!quietSince || stalled) quietSince = now;
        if (now - quietSince >= quietMs) { clearInterval(iv); resolve(now); }
      }
      if (now - start > timeout) { clearInterval(iv); reject(new Error('no pause in the microphone')); }
    }, 5);
  }), [LOUD, quietMs, timeout]);
}

// waitSentQuiet resolves once the sent audio has had sound and then been
// quiet for ms.
function waitSentQuiet(ms = 250, timeout = 15000) {
  return page.evaluate(([loud, ms, timeout]) => new Promise((resolve, reject) => {
    let wasLoud = false, quietSince = 0;
    const start = performance.now();
    const iv = setInterval(() => {
      const s = window.holdline.levels().sent;
      const now = performance.now();
      if (s > loud) { wasLoud = true; quietSince = 0; } else if (wasLoud) {
        if (!quietSince) quietSince = now;
        if (now - quietSince >= ms) { clearInterval(iv); resolve(now); }
      }
      if (now - start > timeout) { clearInterval(iv); reject(new Error('the caller never finished speaking')); }
    }, 5);
  }), [LOUD, ms, timeout]);
}

async function agentPeak(fromT, toT) {
  return page.evaluate(([a, b]) => window.holdline.levelLog
    .filter((l) => l.t >= a && l.t <= b).reduce((m, l) => Math.max(m, l.agent), 0), [fromT, toT]);
}

async function now() { return page.evaluate(() => performance.now()); }

// startStats records, every 10 ms, the audio energy WebRTC itself counted:
// for the microphone as it enters the sender (media-source) and for the
// agent as it leaves the receiver's jitter buffer for playout
// (inbound-rtp). Differences give each interval's loudness in the
// browser's own media clock, free of any Web Audio delay.
function startStats() {
  return page.evaluate(() => {
    window.__stats = [];
    const poll = async () => {
      const pc = window.holdline.pc;
      if (pc) {
        const t = performance.now();
        const r = await pc.getStats();
        const s = { t };
        r.forEach((v) => {
          if (v.kind !== 'audio') return;
          if (v.type === 'media-source') { s.srcE = v.totalAudioEnergy; s.srcD = v.totalSamplesDuration; }
          if (v.type === 'inbound-rtp') { s.inE = v.totalAudioEnergy; s.inD = v.totalSamplesDuration; }
        });
        window.__stats.push(s);
        if (window.__stats.length > 30000) window.__stats.splice(0, 10000);
      }
      window.__statsTimer = setTimeout(poll, 10);
    };
    poll();
  });
}

// statLevels turns the recorded totals after t0 into per-interval RMS.
function statLevels(t0) {
  return page.evaluate((t0) => {
    const S = window.__stats.filter((s) => s.t >= t0 - 500);
    const out = [];
    for (let i = 1; i < S.length; i++) {
      const a = S[i - 1], b = S[i];
      const rms = (e1, e0, d1, d0) => (d1 > d0 ? Math.sqrt(Math.max(0, (e1 - e0) / (d1 - d0))) : 0);
      out.push({ t: b.t, sent: rms(b.srcE, a.srcE, b.srcD, a.srcD), agent: rms(b.inE, a.inE, b.inD, a.inD) });
    }
    return out;
  }, t0);
}

// ---------------------------------------------------------------- booking

async function booking() {
  await page.evaluate(() => window.holdline.setMuted(true));
  const t1 = await now();
  await page.evaluate(() => window.holdline.connect());
  log('connected', await page.evaluate(() => window.holdline.sessionId));
  result.session = await page.evaluate(() => window.holdline.sessionId);
  const greeting = await waitEvent((e) => e.kind === 'playout_done', 30000, 'the greeting');
  await waitEvent((e) => e.kind === 'idle', 10000, 'idle after the greeting');
  result.greeting = greeting.text;
  result.greetingPeakRMS = await agentPeak(t1, await now());
  log('greeting heard, peak RMS', result.greetingPeakRMS.toFixed(3));
  if (result.greetingPeakRMS < LOUD) throw new Error('no greeting audio reached the page');

  // The caller speaks the file's request once. The file pauses 5.5 s
  // between plays, so a second of quiet is surely that pause.
  const tUnmute = await waitSilenceStart(1000, 20000);
  await page.evaluate(() => window.holdline.setMuted(false));
  const turn = await waitEvent((e) => e.kind === 'user_turn', 20000, 'the caller\'s turn');
  await page.evaluate(() => window.holdline.setMuted(true));
  result.heard = turn.text;
  // How long after the unmute the caller's first sound went out: a whole
  // utterance starts some 4.5 s in; much less means it was cut.
  result.onsetAfterUnmuteMs = await page.evaluate(([tu, loud]) => {
    const on = window.holdline.levelLog.find((l) => l.t > tu && l.sent > loud);
    return on ? Math.round(on.t - tu) : -1;
  }, [tUnmute, LOUD]);
  log('heard:', turn.text, `(speech went out ${result.onsetAfterUnmuteMs} ms after the unmute)`);
  const done = await waitEvent((e) => e.kind === 'tool_terminal' && e.tool === 'book_table', 30000, 'book_table');
  result.bookState = done.state;
  const reply = await waitEvent((e) => e.kind === 'playout_done' && /booked/i.test(e.text || ''), 30000, 'the booking reply');
  result.reply = reply.text;
  log('reply:', reply.text);
  await page.screenshot({ path: `${outDir}/booking.png`, fullPage: true });

  // The page reloads: the client resumes the same session.
  const before = await lastSeq();
  await page.reload();
  await page.waitForFunction(() => window.holdline && window.holdline.state === 'connected', null, { timeout: 20000 });
  result.resumed = await page.evaluate(() => window.holdline.resumed);
  result.sameSession = (await page.evaluate(() => window.holdline.sessionId)) === result.session;
  await page.evaluate(() => window.holdline.setMuted(true));
  await page.waitForFunction((n) => window.holdline.events.reduce((m, e) => Math.max(m, e.seq), 0) >= n, before, { timeout: 10000 });
  log('resumed', result.resumed, 'same session', result.sameSession);
  const t2 = await now();
  await page.evaluate(() => window.holdline.sendText('Are you free at eight?'));
  const asked = await waitEvent((e) => e.kind === 'user_turn' && e.text === 'Are you free at eight?', 10000, 'the typed turn');
  const answer = await page.waitForFunction((s) => window.holdline.events.find((e) => e.kind === 'playout_done' && e.seq > s), asked.seq, { timeout: 30000, polling: 20 }).then((h) => h.jsonValue());
  result.afterResume = answer.text;
  result.afterResumePeakRMS = await agentPeak(t2, await now());
  log('after the resume:', answer.text, 'peak RMS', result.afterResumePeakRMS.toFixed(3));
  const evs = await events();
  result.bookTableRuns = evs.filter((e) => e.kind === 'tool_terminal' && e.tool === 'book_table').length;
  result.sessionStarts = evs.filter((e) => e.kind === 'session_started').length;
  result.transportLost = evs.filter((e) => e.kind === 'transport_lost').length;
  result.transportRestored = evs.filter((e) => e.kind === 'transport_restored').length;
  await page.screenshot({ path: `${outDir}/resumed.png`, fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.screenshot({ path: `${outDir}/phone.png`, fullPage: false });
}

// ---------------------------------------------------------------- move

async function move(worker) {
  await page.evaluate(() => window.holdline.setMuted(true));
  await page.evaluate(() => window.holdline.connect());
  result.session = await page.evaluate(() => window.holdline.sessionId);
  await waitEvent((e) => e.kind === 'playout_done', 30000, 'the greeting');
  await page.evaluate(() => window.holdline.sendText('Book a table for two at seven.'));
  const done = await waitEvent((e) => e.kind === 'tool_terminal' && e.tool === 'book_table', 30000, 'book_table');
  result.bookState = done.state;
  result.reply = (await waitEvent((e) => e.kind === 'playout_done' && /booked/i.test(e.text || ''), 30000, 'the booking reply')).text;
  // Watch the page's state from here: the move shows as a short
  // reconnect.
  await page.evaluate(() => {
    window.__states = [];
    let last = '';
    const iv = setInterval(() => {
      const s = window.holdline.state;
      if (s !== last) { window.__states.push({ s, t: performance.now() }); last = s; }
    }, 5);
    window.__stopStates = () => clearInterval(iv);
  });
  const res = await fetch(`${worker}/v1/admin/drain`, { method: 'POST', headers: { Authorization: `Bearer ${process.env.HOLDLINE_ADMIN_TOKEN}` } });
  if (res.status !== 202) throw new Error(`the drain was refused: HTTP ${res.status}`);
  log('drain asked of', worker);
  const moved = await waitEvent((e) => e.kind === 'session_moved', 30000, 'session_moved');
  result.movedText = moved.text;
  await page.waitForFunction(() => window.holdline.state === 'connected' && window.__states.some((x) => x.s === 'reconnecting'), null, { timeout: 30000 });
  const states = await page.evaluate(() => { window.__stopStates(); return window.__states; });
  const away = states.find((x) => x.s === 'reconnecting');
  const back = states.find((x) => x.s === 'connected' && x.t > away.t);
  result.moveMs = Math.round(back.t - away.t);
  result.sameSession = (await page.evaluate(() => window.holdline.sessionId)) === result.session;
  log('moved:', moved.text, `in ${result.moveMs} ms`);
  const t2 = await now();
  await page.evaluate(() => window.holdline.sendText('Are you free at eight?'));
  const asked = await waitEvent((e) => e.kind === 'user_turn' && e.text === 'Are you free at eight?', 10000, 'the typed turn');
  const answer = await page.waitForFunction((s) => window.holdline.events.find((e) => e.kind === 'playout_done' && e.seq > s), asked.seq, { timeout: 30000, polling: 20 }).then((h) => h.jsonValue());
  result.afterResume = answer.text;
  result.afterResumePeakRMS = await agentPeak(t2, await now());
  log('after the move:', answer.text, 'peak RMS', result.afterResumePeakRMS.toFixed(3));
  const evs = await events();
  result.bookTableRuns = evs.filter((e) => e.kind === 'tool_terminal' && e.tool === 'book_table').length;
  result.sessionStarts = evs.filter((e) => e.kind === 'session_started').length;
  result.ended = { logged: evs.filter((e) => e.kind === 'session_ended').map((e) => e.reason || '') };
  await page.screenshot({ path: `${outDir}/moved.png`, fullPage: true });
}

// ---------------------------------------------------------------- relay

// relay connects `sessions` times, each in a new tab of the relay-only
// page, and notes for each whether the greeting was heard and the type of
// the candidates the media went over.
async function relay(sessions) {
  result.relay = [];
  for (let i = 0; i < sessions; i++) {
    if (i > 0) {
      await page.close();
      page = await browser.newPage({ bypassCSP: true });
      await page.goto(`${url}/?aec=0&relay=1`);
      await page.waitForFunction(() => window.holdline && window.holdline.state === 'idle');
    }
    const r = { connected: false };
    result.relay.push(r);
    // The server's token (it serves off the loopback), as a user types it.
    const token = process.env.HOLDLINE_TOKEN || '';
    if (token) await page.evaluate((t) => { document.getElementById('token').value = t; }, token);
    await page.evaluate(() => window.holdline.setMuted(true));
    const t1 = await now();
    try {
      await page.evaluate(() => window.holdline.connect());
      r.connected = true;
      r.connectMs = Math.round(await now() - t1);
      r.session = await page.evaluate(() => window.holdline.sessionId);
      // Heard: the greeting's audio at the page, loud for a moment.
      await page.waitForFunction(([a, loud]) => window.holdline.levelLog.some((l) => l.t >= a && l.agent > loud * 4),
        [t1, LOUD], { timeout: 30000, polling: 20 }).catch(() => { throw new Error('no greeting audio reached the page'); });
      r.greetingPeakRMS = await agentPeak(t1, await now());
      Object.assign(r, await page.evaluate(async () => {
        const stats = await window.holdline.pc.getStats();
        let pair;
        stats.forEach((v) => { if (v.type === 'transport' && v.selectedCandidatePairId) pair = stats.get(v.selectedCandidatePairId); });
        if (!pair) return {};
        const local = stats.get(pair.localCandidateId), remote = stats.get(pair.remoteCandidateId);
        return { local: local && local.candidateType, relayProtocol: local && local.relayProtocol, remote: remote && remote.candidateType };
      }));
      if (i === 0) {
        await waitEvent((e) => e.kind === 'idle', 30000, 'idle after the greeting');
        await waitSilenceStart(1000, 20000);
        await page.evaluate(() => window.holdline.setMuted(false));
        const turn = await waitEvent((e) => e.kind === 'user_turn', 20000, 'the caller\'s turn');
        await page.evaluate(() => window.holdline.setMuted(true));
        r.heard = turn.text;
        const done = await waitEvent((e) => e.kind === 'tool_terminal' && e.tool === 'book_table', 30000, 'book_table');
        r.bookState = done.state;
        r.reply = (await waitEvent((e) => e.kind === 'playout_done' && /booked/i.test(e.text || ''), 30000, 'the booking reply')).text;
      }
    } catch (e) {
      r.error = String(e.message || e);
    }
    log(`session ${i + 1}:`, JSON.stringify(r));
    await page.evaluate(() => window.holdline.disconnect()).catch(() => {});
  }
}

// ---------------------------------------------------------------- barge-in

async function bargein(trials) {
  await page.evaluate(() => window.holdline.setMuted(true));
  await page.evaluate(() => window.holdline.connect());
  await waitEvent((e) => e.kind === 'playout_done', 30000, 'the greeting');
  await startStats();
  result.latenciesMs = [];
  result.discarded = 0;
  for (let i = 0; result.latenciesMs.length < trials; i++) {
    if (i >= trials * 2) throw new Error(`only ${result.latenciesMs.length} of ${trials} trials landed while the agent spoke`);
    // Wait for the agent to be idle: an idle event after its latest turn.
    await page.waitForFunction(() => {
      const evs = window.holdline.events;
      const turn = evs.reduce((m, e) => (e.kind === 'turn_started' ? Math.max(m, e.seq) : m), 0);
      return evs.some((e) => e.kind === 'idle' && e.seq > turn);
    }, null, { timeout: 30000, polling: 20 });
    const s0 = await lastSeq();
    await page.evaluate(() => window.holdline.sendText('Hello'));
    const started = await page.waitForFunction((s) => window.holdline.events.find((e) => e.kind === 'playout_started' && e.seq > s), s0, { timeout: 20000, polling: 10 }).then((h) => h.jsonValue());
    // Let the agent get into its sentence, then open the microphone at the
    // next pause of the file: the caller starts speaking at the pause's end.
    await page.waitForTimeout(300 + Math.floor(Math.random() * 700));
    const tUnmute = await waitSilenceStart();
    await page.evaluate(() => window.holdline.setMuted(false));
    await waitSentQuiet(250);
    await page.evaluate(() => window.holdline.setMuted(true));
    const cut = await page.waitForFunction((ep) => window.holdline.events.find((e) => (e.kind === 'playout_truncated' || e.kind === 'playout_done') && e.epoch === ep), started.epoch, { timeout: 20000, polling: 10 }).then((h) => h.jsonValue());
    // Measure in the page's level log: onset is the first loud sample sent
    // after unmuting; the stop is the last loud sample of the agent after
    // the onset that is followed by 300 ms of quiet.
    await page.waitForTimeout(400);
    const L = await statLevels(tUnmute);
    const measure = ([tu, loud, L]) => {
      const on = L.find((l) => l.t > tu && l.sent > loud);
      if (!on) return null;
      const before = L.filter((l) => l.t >= on.t - 150 && l.t <= on.t).some((l) => l.agent > loud);
      let last = on.t;
      for (const l of L) {
        if (l.t < on.t) continue;
        if (l.agent > loud) { if (l.t - last > 300) break; last = l.t; }
      }
      return { onset: on.t, onsetWall: performance.timeOrigin + on.t, stop: last, agentSpeakingAtOnset: before };
    };
    // What the page's own audio graph heard (Web Audio analysers on the
    // microphone and on the agent's track), and, as a cross-check, what
    // WebRTC's statistics counted.
    const m = await page.evaluate(([tu, loud, src]) => (new Function('return ' + src))()([tu, loud, window.holdline.levelLog]), [tUnmute, LOUD, measure.toString()]);
    const ms2 = await page.evaluate(([tu, loud, L, src]) => (new Function('return ' + src))()([tu, loud, L]), [tUnmute, LOUD, L, measure.toString()]);
    const decided = await page.evaluate((s) => window.holdline.events.find((e) => e.seq > s && (e.kind === 'barge_in_suspected' || e.kind === 'barge_in_confirmed' || e.kind === 'turn_interrupted')), started.seq);
    if (m && decided) m.decidedMs = Math.round(Date.parse(decided.time) - m.onsetWall);
    const path = await page.evaluate(([a, ep]) => window.holdline.events
      .filter((e) => e.seq > a && (e.kind.startsWith('barge_in') || e.kind === 'speech_started' || e.kind === 'user_turn' || e.kind === 'transcript' || e.kind === 'turn_interrupted' || e.kind === 'playout_truncated'))
      .map((e) => `${(e.at_ns / 1e6).toFixed(0)} ${e.kind}${e.reason ? '(' + e.reason + ')' : ''}${e.text && e.kind !== 'playout_truncated' ? ' ' + e.text : ''}`).join(', '), [started.seq, started.epoch]);
    log(`trial ${i + 1}: ${path}`);
    if (!m || !m.agentSpeakingAtOnset || cut.kind !== 'playout_truncated') {
      result.discarded++;
      log(`trial ${i + 1}: discarded (agent speaking at onset: ${m && m.agentSpeakingAtOnset}, ${cut.kind})`);
      continue;
    }
    const ms = Math.round(m.stop - m.onset);
    if (process.env.TRACE) log(L.filter((l) => l.t >= m.onset - 200 && l.t <= m.onset + 1500).map((l) => `${Math.round(l.t - m.onset)}:${l.sent.toFixed(2)}/${l.agent.toFixed(2)}`).join(' '));
    result.latenciesMs.push(ms);
    log(`trial ${i + 1}: onset → agent audio stopped ${ms} ms (server decided after ${m.decidedMs} ms)`);
    (result.decidedMs ||= []).push(m.decidedMs);
    if (ms2 && ms2.agentSpeakingAtOnset) (result.statsLatenciesMs ||= []).push(Math.round(ms2.stop - ms2.onset));
  }
  const sorted = [...result.latenciesMs].sort((a, b) => a - b);
  const pct = (p) => sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)];
  result.p50 = pct(0.5);
  result.p95 = pct(0.95);
  result.max = sorted[sorted.length - 1];
  await page.screenshot({ path: `${outDir}/bargein.png`, fullPage: true });
}

// ------------------------------------------------------------- backchannel

async function backchannel(trials) {
  await page.evaluate(() => window.holdline.setMuted(true));
  await page.evaluate(() => window.holdline.connect());
  await waitEvent((e) => e.kind === 'playout_done', 30000, 'the greeting');
  Object.assign(result, { gapsMs: [], silencesMs: [], cuts: 0, discarded: 0, trialsRun: 0 });
  for (let i = 0; result.trialsRun < trials; i++) {
    if (i >= trials * 3) throw new Error(`only ${result.trialsRun} of ${trials} trials landed while the agent spoke`);
    await page.waitForFunction(() => {
      const evs = window.holdline.events;
      const turn = evs.reduce((m, e) => (e.kind === 'turn_started' ? Math.max(m, e.seq) : m), 0);
      return evs.some((e) => e.kind === 'idle' && e.seq > turn);
    }, null, { timeout: 30000, polling: 20 });
    const s0 = await lastSeq();
    await page.evaluate(() => window.holdline.sendText('Hello'));
    const started = await page.waitForFunction((s) => window.holdline.events.find((e) => e.kind === 'playout_started' && e.seq > s), s0, { timeout: 20000, polling: 10 }).then((h) => h.jsonValue());
    await page.waitForTimeout(100 + Math.floor(Math.random() * 500));
    const tUnmute = await waitSilenceStart();
    await page.evaluate(() => window.holdline.setMuted(false));
    await waitSentQuiet(250);
    await page.evaluate(() => window.holdline.setMuted(true));
    // The verdict on a short sound comes within about a second and a
    // half of its onset; 2.5 s more see it and the words after it.
    await page.waitForTimeout(2500);
    const m = await page.evaluate(([tu, loud]) => {
      const L = window.holdline.levelLog;
      const k = L.findIndex((l) => l.t > tu && l.sent > loud);
      if (k < 0) return null;
      const on = L[k].t;
      let end = on;
      for (const l of L.slice(k)) {
        if (l.sent > loud) end = l.t;
        else if (l.t - end > 200) break;
      }
      const speaking = L.some((l) => l.t >= on - 150 && l.t <= on && l.agent > loud);
      const backAt = L.find((l) => l.t > end && l.agent > loud);
      const back = backAt ? backAt.t : null;
      let longest = 0, last = on - 200;
      for (const l of L) {
        if (l.t < on - 200 || (back && l.t > back)) continue;
        if (l.agent > loud) { longest = Math.max(longest, l.t - last); last = l.t; }
      }
      if (!back) longest = Math.max(longest, L[L.length - 1].t - last);
      return { on, end, speaking, back, longest };
    }, [tUnmute, LOUD]);
    const path = await page.evaluate((a) => window.holdline.events
      .filter((e) => e.seq > a && (e.kind.startsWith('barge_in') || e.kind === 'transcript' || e.kind === 'transcript_ignored' || e.kind === 'turn_interrupted' || e.kind === 'user_turn'))
      .map((e) => `${(e.at_ns / 1e6).toFixed(0)} ${e.kind}${e.reason ? '(' + e.reason + ')' : ''}${e.text ? ' ' + e.text : ''}`).join(', '), started.seq);
    if (!m || !m.speaking) {
      result.discarded++;
      log(`trial ${i + 1}: discarded (agent speaking at onset: ${m && m.speaking}): ${path}`);
      continue;
    }
    result.trialsRun++;
    const cut = await page.evaluate((ep) => window.holdline.events.some((e) => e.epoch === ep && (e.kind === 'turn_interrupted' || e.kind === 'playout_truncated')), started.epoch);
    if (cut) {
      result.cuts++;
      log(`trial ${i + 1}: the answer was cut (sound ${Math.round(m.end - m.on)} ms): ${path}`);
      continue;
    }
    const gap = m.back ? Math.round(m.back - m.end) : 99999;
    result.gapsMs.push(gap);
    result.silencesMs.push(Math.round(m.longest));
    log(`trial ${i + 1}: sound ${Math.round(m.end - m.on)} ms; the agent back ${gap} ms after it, longest silence ${Math.round(m.longest)} ms: ${path}`);
  }
}

// -------------------------------------------------------------------- page

// connectOutcome connects and returns what the page shows afterwards.
async function connectOutcome() {
  const err = await page.evaluate(() => window.holdline.connect().then(() => '', (e) => String(e && e.message)));
  return page.evaluate((err) => ({
    error: err,
    state: window.holdline.state,
    problem: document.getElementById('token-field').dataset.problem || '',
    note: document.getElementById('token-note').textContent,
    status: document.getElementById('status').textContent,
  }), err);
}

// visibleTimeline lists the timeline entries a reader sees: kind, label
// and detail.
function visibleTimeline() {
  return page.evaluate(() => [...document.querySelectorAll('#timeline > li')]
    .filter((li) => li.offsetParent !== null)
    .map((li) => ({
      kind: li.dataset.kind,
      label: (li.querySelector('.tl-label') || {}).textContent || '',
      detail: (li.querySelector('.tl-detail') || {}).textContent || '',
    })));
}

// waitIdleAfter waits until the agent is idle after its latest turn.
function waitIdle(timeout = 30000) {
  return page.waitForFunction(() => {
    const evs = window.holdline.events;
    const turn = evs.reduce((m, e) => (e.kind === 'turn_started' ? Math.max(m, e.seq) : m), 0);
    return evs.some((e) => e.kind === 'idle' && e.seq > turn);
  }, null, { timeout, polling: 50 });
}

async function pageScenario(token) {
  await page.evaluate(() => window.holdline.setMuted(true));
  await page.waitForFunction(() => !document.getElementById('token-field').hidden, null, { timeout: 5000 });

  // No token, then a wrong one: the page says which.
  result.missing = await connectOutcome();
  log('without a token:', JSON.stringify(result.missing));
  await page.fill('#token', 'not-the-token');
  result.wrong = await connectOutcome();
  log('with a wrong token:', JSON.stringify(result.wrong));
  await page.fill('#token', token);
  result.right = await connectOutcome();
  log('with the token:', JSON.stringify(result.right));
  result.storage = await page.evaluate(() => ({
    session: sessionStorage.getItem('holdline.token'),
    local: localStorage.getItem('holdline.token'),
  }));
  await waitEvent((e) => e.kind === 'playout_done', 30000, 'the greeting');
  await waitIdle();

  // Typed text over the limit: the page shows the server's refusal, the
  // message is marked not sent, no turn comes of it.
  const s0 = await lastSeq();
  const huge = await page.evaluate(() => window.holdline.sendText('a'.repeat(200000)));
  await page.waitForFunction(() => document.querySelector('.msg.user.refused'), null, { timeout: 10000 });
  await page.evaluate(() => window.holdline.sendText('Are you free at eight?'));
  await waitEvent((e) => e.kind === 'user_turn' && e.text === 'Are you free at eight?', 10000, 'the typed turn');
  result.limit = await page.evaluate((s0) => ({
    sent: true,
    status: document.getElementById('status').textContent,
    refusedTag: (document.querySelector('.msg.user.refused .tag') || {}).textContent || '',
    pending: document.querySelectorAll('.msg.user.pending').length,
    hugeTurns: window.holdline.events.filter((e) => e.seq > s0 && e.kind === 'user_turn' && (e.text || '').length > 1000).length,
  }), s0);
  result.limit.sent = huge;
  log('over the limit:', JSON.stringify(result.limit));
  await waitIdle();

  // Checkpoint lines: there, hidden, shown with "Show all".
  await waitEvent((e) => e.kind === 'checkpoint_saved', 20000, 'a checkpoint');
  result.checkpointsHidden = (await visibleTimeline()).filter((e) => e.kind === 'checkpoint_saved').length;
  await page.check('#show-all');
  result.checkpointsShown = (await visibleTimeline()).filter((e) => e.kind === 'checkpoint_saved').length;
  await page.uncheck('#show-all');
  log('checkpoint lines: hidden view', result.checkpointsHidden, 'show all', result.checkpointsShown);

  // A reload while the agent answers, and the resumed page's timeline. At
  // the model request, before any audio, the turn is cut with nothing
  // played, which made an empty "Agent cut off" line. Whether the first
  // audio beats the reload is a race (a loaded machine loses it more often): up to ten tries.
  const silent = () => page.evaluate(() => window.holdline.events.filter((e) => e.kind === 'playout_truncated' && !e.text && !(e.played_ns > 0)).length);
  result.reloads = 0;
  while (result.reloads < 10 && (await silent()) === 0) {
    result.reloads++;
    const s1 = await lastSeq();
    await page.evaluate(() => window.holdline.sendText('What times are available?'));
    await page.waitForFunction((s) => window.holdline.events.find((e) => e.kind === 'inference_sent' && e.seq > s), s1, { timeout: 20000, polling: 5 });
    await page.reload();
    await page.waitForFunction(() => window.holdline && window.holdline.state === 'connected', null, { timeout: 20000 });
    await page.evaluate(() => window.holdline.setMuted(true));
    await page.waitForFunction((n) => window.holdline.events.reduce((m, e) => Math.max(m, e.seq), 0) >= n, s1, { timeout: 10000 });
    await waitIdle();
    await page.waitForTimeout(500);
  }
  const tl = await visibleTimeline();
  result.cutOff = tl.filter((e) => e.kind === 'playout_truncated');
  result.emptyCutOff = result.cutOff.filter((e) => !e.detail.trim()).length;
  await page.check('#show-all');
  result.emptyCutOffShowAll = (await visibleTimeline()).filter((e) => e.kind === 'playout_truncated' && !e.detail.trim()).length;
  await page.uncheck('#show-all');
  result.silentCuts = await page.evaluate(() => window.holdline.events.filter((e) => e.kind === 'playout_truncated' && !e.text && !(e.played_ns > 0)).length);
  result.truncations = await page.evaluate(() => window.holdline.events.filter((e) => e.kind === 'playout_truncated')
    .map((e) => `${e.seq} epoch ${e.epoch} played ${e.played_ns || 0} "${e.text || ''}"`));
  log('after the reload, cut-off entries:', JSON.stringify(result.cutOff), 'events:', JSON.stringify(result.truncations));
  result.tokenAfterReload = await page.evaluate(() => document.getElementById('token').value !== '');
  await page.screenshot({ path: `${outDir}/page-reloaded.png`, fullPage: true });

  // End call while the agent speaks.
  const s2 = await lastSeq();
  await page.evaluate(() => window.holdline.sendText('What times are available?'));
  await page.waitForFunction((s) => window.holdline.events.find((e) => e.kind === 'playout_started' && e.seq > s), s2, { timeout: 20000, polling: 10 });
  await page.waitForFunction(() => document.querySelector('.msg.agent.live'), null, { timeout: 10000 });
  await page.click('#disconnect');
  await page.waitForFunction(() => window.holdline.state === 'ended', null, { timeout: 5000 });
  result.ended = await page.evaluate(() => {
    const bubbles = [...document.querySelectorAll('.msg.agent')];
    const last = bubbles[bubbles.length - 1];
    return {
      live: document.querySelectorAll('.msg.agent.live').length,
      lastTag: last ? ((last.querySelector('.tag') || {}).textContent || '') : '',
      lastText: last ? ((last.querySelector('.text') || {}).textContent || '') : '',
      logged: [...document.querySelectorAll('#timeline > li')].filter((li) => li.dataset.kind === 'call_ended' && li.offsetParent !== null)
        .map((li) => li.querySelector('.tl-label').textContent),
    };
  });
  log('after End call:', JSON.stringify(result.ended));
  await page.screenshot({ path: `${outDir}/page-ended.png`, fullPage: true });
}

// LiveKit's own JavaScript client (livekit-client from npm) in Debian's
// Chromium, as a caller in a LiveKit room a Holdline agent serves:
//
//   node livekit.mjs PAGE_URL LIVEKIT_URL TOKEN CALLER.wav [SECONDS]
//
// The page joins the room with the token, publishes the fake microphone
// (the WAV), hears the agent's track, and records the agent's
// lk.agent.state changes and the lk.transcription streams. It runs until
// the caller's words and an answer after them have arrived as final
// transcriptions, or SECONDS (default 60) have passed, then prints what
// the page saw as JSON; livekit/browser_test.go judges it.
import { chromium } from 'playwright-core';

const [pageURL, lkURL, token, wav, secs] = process.argv.slice(2);
const t0 = Date.now();
const log = (...a) => console.error(`[${((Date.now() - t0) / 1000).toFixed(1)}s]`, ...a);
const deadline = t0 + 1000 * Number(secs || 60);

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  timeout: 30000,
  args: [
    '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
    '--allow-loopback-in-peer-connection', '--use-fake-ui-for-media-stream',
    '--use-fake-device-for-media-stream', `--use-file-for-fake-audio-capture=${wav}`,
    '--autoplay-policy=no-user-gesture-required',
    // Plain host candidates, no mDNS names (whose registration multicasts).
    '--disable-features=WebRtcHideLocalIpsWithMdns',
  ],
});
const result = { ok: false };
try {
  const page = await browser.newPage();
  page.setDefaultTimeout(20000);
  page.on('console', (m) => log('page:', m.text()));
  page.on('pageerror', (e) => log('page exception:', e.message));
  // Nothing but the test's own servers on 127.0.0.1.
  await page.route('**/*', (route) => {
    const u = new URL(route.request().url());
    if (u.hostname === '127.0.0.1') return route.continue();
    log('blocked a request to', u.href);
    return route.abort();
  });
  await page.goto(pageURL);
  await page.waitForFunction(() => typeof window.start === 'function' && window.LivekitClient);
  await page.evaluate(([u, tok]) => window.start(u, tok), [lkURL, token]);
  let s = await page.evaluate(() => window.snapshot());
  if (s.error) throw new Error(`in the page: ${s.error}`);
  log('connected as', s.identity, 'with livekit-client', s.version);
  // Until the caller's words are final, the agent has answered them, and
  // the room has been quiet (no stream open, no state change, the agent
  // listening) for two seconds.
  const final = (x) => x.done && (x.endAttributes || {})['lk.transcription_final'] === 'true';
  while (Date.now() < deadline) {
    s = await page.evaluate(() => window.snapshot());
    const mine = s.streams.find((x) => x.sender === s.identity && final(x));
    const answered = mine && s.streams.some((x) => x.sender !== s.identity && x.done && x.at > mine.at);
    const open = s.streams.some((x) => !x.done);
    const last = Math.max(0, ...s.streams.map((x) => x.doneAt || x.at), ...s.states.map((x) => x.at));
    const agentState = s.states.length ? s.states[s.states.length - 1].state : '';
    if (answered && !open && agentState === 'listening' && s.now - last > 2000) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  result.page = await page.evaluate(() => window.snapshot());
  await page.evaluate(() => window.stop());
  result.ok = true;
} catch (e) {
  result.error = String(e && e.stack || e);
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(result) + '\n');

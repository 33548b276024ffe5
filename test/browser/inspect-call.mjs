// Opens one page written by `holdline inspect` for a recorded call in
// Debian's Chromium and prints, as JSON, what it shows: the event kinds,
// sequence numbers and lanes in its DOM, the turn cards, the page's
// errors and the tip of its confirmed barge-in. Saves a full-page
// screenshot of it, the call fitted to the width, with no tip open.
//
//   node inspect-call.mjs PAGE.html SHOT.png
//
// The page is opened from file:// with every request elsewhere refused
// and counted, so a page that is not self-contained shows up as requests.
import { chromium } from 'playwright-core';
import { pathToFileURL } from 'node:url';

const [file, shot] = process.argv.slice(2);

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const out = { ok: true, file, errors: [], requests: [] };
try {
  const page = await browser.newPage({ viewport: { width: 1600, height: 900 } });
  page.on('pageerror', (e) => out.errors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') out.errors.push(m.text()); });
  const url = pathToFileURL(file).href;
  await page.route('**/*', (route) => {
    const u = route.request().url();
    if (u === url) return route.continue();
    out.requests.push(u);
    return route.abort();
  });
  await page.goto(url);
  await page.waitForSelector('.hl-timeline [data-seq]', { state: 'attached' });
  await page.click('.hl-btn[title="Fit the call to the width"]');
  Object.assign(out, await page.evaluate(() => {
    const items = [...document.querySelectorAll('.hl-timeline [data-seq]')];
    const lanes = {};
    for (const n of items) {
      const lane = n.closest('[data-lane]');
      (lanes[lane ? lane.dataset.lane : '?'] ||= []).push(n.dataset.kind);
    }
    const events = JSON.parse(document.getElementById('holdline-events').textContent);
    return {
      kinds: [...new Set(items.map((n) => n.dataset.kind))].sort(),
      seqs: items.map((n) => Number(n.dataset.seq)).sort((a, b) => a - b),
      fileSeqs: events.map((e) => e.seq).sort((a, b) => a - b),
      lanes,
      turns: document.querySelectorAll('.hl-turn').length,
      canvasWidth: document.querySelector('.hl-canvas').scrollWidth,
      width: document.querySelector('.hl-scroll').clientWidth,
    };
  }));
  // Hover the confirmed barge-in: its tip shows its fields, the reason
  // among them. Then away, so the tip covers nothing in the shot.
  const tipText = () => page.evaluate(() => {
    const tip = document.querySelector('.hl-tip');
    return tip && !tip.hidden ? tip.innerText : '';
  });
  const barge = await page.$('.hl-timeline [data-kind="barge_in_confirmed"]');
  if (barge) {
    await barge.scrollIntoViewIfNeeded();
    await barge.hover({ force: true });
    out.tip = await tipText();
  }
  await page.mouse.move(0, 0);
  await page.evaluate(() => document.activeElement && document.activeElement.blur());
  await page.evaluate(() => window.scrollTo(0, 0));
  out.tipAfter = await tipText();
  await page.screenshot({ path: shot, fullPage: true });
  out.screenshot = shot;
} catch (e) {
  out.ok = false;
  out.error = String(e && e.stack || e);
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(out));

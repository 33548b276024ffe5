// A bare WebRTC caller in Debian's Chromium, for the lossy-path test
// (cli/browser_loss_test.go): the fake microphone plays the WAV, the page
// offers its audio to URL/offer (the test's own endpoint, which answers
// with a relay of its own as the only candidate), sends for SECONDS, and
// prints as JSON what WebRTC counted and every Opus frame it sent (RTP
// timestamp and payload, taken before encryption by an encoded transform),
// so that the test can decode exactly what was sent.
//
//   node loss.mjs URL CALLER.wav SECONDS
//
// The microphone's own processing (echo cancellation, noise suppression,
// gain control) is off, so that runs of the same file send the same audio.
import { chromium } from 'playwright-core';

const [url, wav, secondsArg] = process.argv.slice(2);
const seconds = Number(secondsArg || 10);
const t0 = Date.now();
const log = (...a) => console.error(`[${((Date.now() - t0) / 1000).toFixed(1)}s]`, ...a);

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: [
    '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
    '--allow-loopback-in-peer-connection', '--use-fake-ui-for-media-stream',
    '--use-fake-device-for-media-stream', `--use-file-for-fake-audio-capture=${wav}`,
  ],
});
let result;
try {
  const page = await browser.newPage();
  page.on('console', (m) => log('page:', m.text()));
  await page.goto(url);
  result = await page.evaluate(async (seconds) => {
    const pc = new RTCPeerConnection({ encodedInsertableStreams: true });
    const mic = await navigator.mediaDevices.getUserMedia({
      audio: { echoCancellation: false, noiseSuppression: false, autoGainControl: false },
    });
    const sender = pc.addTrack(mic.getAudioTracks()[0], mic);
    const sent = [];
    const { readable, writable } = sender.createEncodedStreams();
    readable.pipeThrough(new TransformStream({
      transform(frame, ctl) {
        const md = frame.getMetadata();
        const b = new Uint8Array(frame.data);
        let s = '';
        for (let i = 0; i < b.length; i++) s += String.fromCharCode(b[i]);
        sent.push({ ts: md.rtpTimestamp ?? frame.timestamp, payload: btoa(s) });
        ctl.enqueue(frame);
      },
    })).pipeTo(writable);
    await pc.setLocalDescription(await pc.createOffer());
    await new Promise((resolve) => {
      if (pc.iceGatheringState === 'complete') return resolve();
      pc.addEventListener('icegatheringstatechange', () => pc.iceGatheringState === 'complete' && resolve());
      setTimeout(resolve, 3000);
    });
    const r = await fetch('/offer', { method: 'POST', body: pc.localDescription.sdp });
    if (!r.ok) throw new Error(`offer: ${r.status} ${await r.text()}`);
    await pc.setRemoteDescription({ type: 'answer', sdp: await r.text() });
    await new Promise((resolve, reject) => {
      const check = () => {
        if (pc.connectionState === 'connected') resolve();
        if (pc.connectionState === 'failed') reject(new Error('connection failed'));
      };
      pc.addEventListener('connectionstatechange', check);
      check();
      setTimeout(() => reject(new Error(`not connected: ${pc.connectionState}`)), 10000);
    });
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
    const out = { ok: true };
    (await pc.getStats()).forEach((v) => {
      if (v.type === 'outbound-rtp' && v.kind === 'audio') {
        out.packetsSent = v.packetsSent;
        out.bytesSent = v.bytesSent;
      }
      if (v.type === 'remote-inbound-rtp' && v.kind === 'audio') {
        out.remoteFractionLost = v.fractionLost;
        out.remotePacketsLost = v.packetsLost;
      }
    });
    pc.close();
    out.sent = sent;
    return out;
  }, seconds);
} catch (e) {
  result = { ok: false, error: String(e && e.stack || e) };
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(result) + '\n');

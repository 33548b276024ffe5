// The page's sound: the microphone (with a muted switch that only stops
// sending), the agent's audio in the <audio> element, the analysers the
// meters read, and the "Click to enable sound" button for when autoplay
// holds the agent's voice back.

// Samples per analyser frame; meters.js reads frames of this size.
export const FFT_SIZE = 512;

// createAudio works the elements in ui (remote, sound, mute, micMeter,
// micLabel, micNote); isLive says whether a call is under way, when a
// blocked speaker is worth a button.
export function createAudio(ui, { processing, isLive }) {
  let ctx = null;
  let micStream = null;
  let micTrack = null;
  let micClone = null; // the meter's copy, which muting leaves running
  let micSource = null;
  let micAnalyser = null;
  let agentSource = null;
  let agentAnalyser = null;
  let remoteBlocked = false;
  let muted = false;

  function updateSoundButton() {
    const blocked = (!!ctx && ctx.state === 'suspended') || remoteBlocked;
    ui.sound.hidden = !(blocked && isLive());
  }

  function makeAnalyser() {
    const a = ctx.createAnalyser();
    a.fftSize = FFT_SIZE;
    a.smoothingTimeConstant = 0;
    return a;
  }

  function wireMicAnalyser() {
    if (!ctx || !micClone || micAnalyser) return;
    try {
      micSource = ctx.createMediaStreamSource(new MediaStream([micClone]));
      micAnalyser = makeAnalyser();
      micSource.connect(micAnalyser);
    } catch (_) {
      micSource = null;
      micAnalyser = null;
    }
  }

  // ensureContext must run inside a user gesture the first time: only
  // then may the audio context start.
  function ensureContext() {
    if (!ctx) {
      const AC = window.AudioContext || window.webkitAudioContext;
      if (!AC) return null;
      try {
        ctx = new AC();
      } catch (_) {
        return null;
      }
      ctx.addEventListener('statechange', updateSoundButton);
      wireMicAnalyser();
    }
    if (ctx.state === 'suspended') ctx.resume().catch(() => {});
    return ctx;
  }

  function checkSoundSoon() {
    if (ctx && ctx.state === 'suspended') ctx.resume().catch(() => {});
    setTimeout(updateSoundButton, 400);
  }

  function unlock() {
    ensureContext();
    if (ui.remote.srcObject) {
      ui.remote.play().then(() => { remoteBlocked = false; updateSoundButton(); }).catch(() => {});
    }
    setTimeout(updateSoundButton, 200);
  }

  // held says whether autoplay is holding any sound back.
  function held() {
    return (!!ctx && ctx.state === 'suspended') || remoteBlocked;
  }

  function showMicNote(text) {
    ui.micNote.textContent = text;
    ui.micNote.hidden = !text;
  }

  async function ensureMic() {
    if (micTrack && micTrack.readyState === 'live') return micTrack;
    if (!navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) {
      showMicNote('This browser gives no microphone access here; you can still type.');
      return null;
    }
    try {
      micStream = await navigator.mediaDevices.getUserMedia({
        audio: { echoCancellation: processing, autoGainControl: processing, noiseSuppression: processing },
        video: false,
      });
    } catch (e) {
      showMicNote(`Microphone unavailable (${e && e.name ? e.name : e}); you can still type.`);
      return null;
    }
    micTrack = micStream.getAudioTracks()[0] || null;
    if (!micTrack) return null;
    micTrack.enabled = !muted;
    micClone = micTrack.clone();
    micClone.enabled = true;
    showMicNote('');
    wireMicAnalyser();
    return micTrack;
  }

  function stopMic() {
    if (micSource) { try { micSource.disconnect(); } catch (_) { /* gone */ } }
    micSource = null;
    micAnalyser = null;
    for (const t of [micTrack, micClone]) if (t) t.stop();
    if (micStream) micStream.getTracks().forEach((t) => t.stop());
    micStream = null;
    micTrack = null;
    micClone = null;
  }

  function detachAgentAnalyser() {
    if (agentSource) { try { agentSource.disconnect(); } catch (_) { /* gone */ } }
    agentSource = null;
    agentAnalyser = null;
  }

  function playRemote(e) {
    if (e.track.kind !== 'audio') return;
    const stream = (e.streams && e.streams[0]) || new MediaStream([e.track]);
    // Chrome only feeds remote WebRTC audio into WebAudio when the stream also
    // plays in a media element.
    ui.remote.srcObject = stream;
    ui.remote.play().then(() => { remoteBlocked = false; updateSoundButton(); })
      .catch(() => { remoteBlocked = true; updateSoundButton(); });
    detachAgentAnalyser();
    if (ctx) {
      try {
        agentSource = ctx.createMediaStreamSource(stream);
        agentAnalyser = makeAnalyser();
        agentSource.connect(agentAnalyser);
      } catch (_) {
        agentSource = null;
        agentAnalyser = null;
      }
    }
    checkSoundSoon();
  }

  function detachRemote() {
    detachAgentAnalyser();
    ui.remote.srcObject = null;
    remoteBlocked = false;
  }

  function setMuted(m) {
    muted = !!m;
    if (micTrack) micTrack.enabled = !muted;
    // A toggle button keeps its name; aria-pressed carries the state.
    ui.mute.setAttribute('aria-pressed', String(muted));
    ui.micMeter.classList.toggle('muted', muted);
    ui.micLabel.textContent = muted ? 'Mic muted' : 'Mic';
    document.body.classList.toggle('is-muted', muted);
    return muted;
  }

  ui.remote.addEventListener('playing', () => { remoteBlocked = false; updateSoundButton(); });

  return {
    ensureContext, checkSoundSoon, updateSoundButton, unlock, held,
    ensureMic, stopMic, playRemote, detachRemote, setMuted,
    get muted() { return muted; },
    get micTrack() { return micTrack; },
    get micAnalyser() { return micAnalyser; },
    get agentAnalyser() { return agentAnalyser; },
  };
}

// How the transcript merges what arrives about a turn: the agent's live
// captions, then the words its playout settled on, and the caller's typed
// messages, shown at once and confirmed when they become turns. No DOM
// here; transcript.js draws what these decide.

// captionShows says whether a live caption is drawn for an agent turn:
// never over a finished turn, and an empty caption starts no bubble.
// turn is what the transcript holds for the epoch, or undefined.
export function captionShows(turn, text) {
  if (turn && turn.final) return false;
  return !!turn || !!text;
}

// finishedWords is what a finished agent turn keeps: the words playout
// reported, or else the captions shown so far. null means the turn was
// already finished, and '' that nothing of it was said.
export function finishedWords(turn, reported, shown) {
  if (turn && turn.final) return null;
  return reported || shown || '';
}

// userTurnAction says what a caller turn does to the transcript: confirm
// the oldest typed message still waiting ('confirm'), add a bubble of its
// own ('add'), or nothing ('none').
export function userTurnAction(ev, waitingTyped) {
  if (ev.reason === 'injected' && waitingTyped > 0) return 'confirm';
  return ev.text ? 'add' : 'none';
}

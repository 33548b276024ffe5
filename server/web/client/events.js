// The session's events as this page has received them: in sequence order,
// each once, however often a resume replays them, and the wall-clock time
// of the session's time 0 once an event tells it.

export class EventStore {
  constructor() {
    this.reset();
  }

  reset() {
    this.events = [];
    this.seen = new Set();
    this.lastSeq = 0;
    this.startWall = null; // ms since the epoch at session time 0
  }

  // add keeps ev unless it is malformed or already here; it says whether
  // it did, and whether ev taught the store the session's start time.
  add(ev) {
    if (!ev || typeof ev.seq !== 'number' || this.seen.has(ev.seq)) return { added: false, clockLearned: false };
    this.seen.add(ev.seq);
    // Events arrive in order but for a replay after a resume: look from
    // the end.
    let i = this.events.length;
    while (i > 0 && this.events[i - 1].seq > ev.seq) i--;
    this.events.splice(i, 0, ev);
    if (ev.seq > this.lastSeq) this.lastSeq = ev.seq;

    let clockLearned = false;
    if (this.startWall == null) {
      const wall = sessionStartWall(ev);
      if (wall != null) {
        this.startWall = wall;
        clockLearned = true;
      }
    }
    return { added: true, clockLearned };
  }

  // sessionTime is the session-clock time (ns) of a wall-clock instant,
  // or null while the start is unknown.
  sessionTime(wallMs) {
    if (this.startWall == null) return null;
    return Math.max(0, (wallMs - this.startWall) * 1e6);
  }
}

// sessionStartWall is the wall-clock ms of session time 0 by an event that
// carries both its wall time and its session time, or null.
export function sessionStartWall(ev) {
  if (!ev || !ev.time || typeof ev.at_ns !== 'number') return null;
  const wall = Date.parse(ev.time);
  return Number.isNaN(wall) ? null : wall - ev.at_ns / 1e6;
}

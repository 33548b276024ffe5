// Package store keeps what a session needs to outlive its worker: its
// latest checkpoint (a signed snapshot from package handoff), the
// write-ahead journal of its mutations, and aliases that lead back to it
// (a WebRTC resume token, a handoff token, a caller's number), with leases
// so that exactly one worker owns a live session and a worker that lost
// its lease cannot overwrite the new owner's state.
//
// Two implementations: [OpenFile], an embedded file store on bbolt that
// `holdline serve` uses with no configuration (one process), and
// [OpenRedis], on Redis, for many workers sharing sessions. [Open] picks
// one from a URL: file:PATH or redis://HOST:PORT.
package store

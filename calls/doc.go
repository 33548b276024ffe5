// Package calls hosts calls: it sits between the transports (WebRTC in
// package server, SIP in package sip, and whatever comes next) and the
// session core (package runtime), and does for every call, whatever
// carries it, what a call needs besides media and signalling.
//
// A Host makes the session for an agent, runs it once the transport's
// media can flow, checkpoints it under a lease when a store is set (and
// resumes it from a snapshot, a handoff token or a redialled line),
// keeps its recent events for readers, counts it in the Prometheus
// metrics, enforces the limits (calls at once, how long a dropped
// connection is waited for), and ends it, deleting its checkpoint, or
// releases it to another worker. It keeps the registry of the live calls
// on this worker, so that the HTTP API can reach every call by its
// session id, a phone call as much as a browser's.
//
// A transport gives the host a Line (where the agent's audio goes, and
// how to hang up) and a Spec (its kind, rates, and how the call came:
// fresh, reconnected, put through or redialled), and then tells the
// call what happens on its side: media in (PushAudio), connection up
// (Connected), dropped (Lost), ended (End). How to add a transport is in
// docs/ARCHITECTURE.md.
package calls

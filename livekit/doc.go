// Package livekit runs Holdline agents in LiveKit rooms, as LiveKit agent
// workers written in Go.
//
// A Worker speaks LiveKit's agent protocol to a LiveKit server: it
// registers (under an agent name, for explicit dispatch, or none, for
// automatic dispatch), answers availability requests, takes job
// assignments, reports its load, and drains. Each job is one room: the
// JobFunc given to NewWorker serves it, usually with Transport.Serve.
//
// Transport.Serve joins the room with the job's token as the agent
// participant and hosts one call there (package calls), as the webrtc and
// sip packages do for theirs:
//
//   - the caller is the job's participant when the dispatch names one,
//     else the first participant who is not an agent to publish a
//     microphone; the agent listens to that caller only (other
//     participants are not heard, and say so in the log). A video track,
//     or audio that is not Opus, is ignored with a log line (a RED
//     publication, redundant Opus as LiveKit's JavaScript client sends a
//     microphone, is heard: the server forwards its Opus);
//   - the caller's Opus is decoded at 16 kHz through the same jitter
//     buffer as a browser's (package media/opusrtp) into the session; the
//     agent's audio goes out as an Opus track with source MICROPHONE, one
//     packet per 20 ms frame of the session's paced player, so that a
//     barge-in stops it at the next packet;
//   - a browser or app participant cancels its own echo, so its input is
//     marked echo-free; a SIP participant (LiveKit's SIP bridge) is a
//     phone line: Holdline's echo canceller is on, and its DTMF data
//     packets reach the session as key presses;
//   - LiveKit's conventions, so that its client components work
//     unchanged: the lk.agent.state attribute (initializing, listening,
//     thinking, speaking), transcriptions on the lk.transcription text
//     stream (the caller's, sent under the caller's identity, interim and
//     final, and the agent's words as they are played, one stream per
//     segment; an interrupted segment ends at the last word played), and
//     typed input from the lk.chat text stream, injected as the caller's
//     turn.
//
// Recovery: with a store (calls.WithStore), each room's session is
// checkpointed under an alias made of the room's id. A worker that dies
// has its rooms re-dispatched by LiveKit; the worker that gets the job
// picks the conversation up from the checkpoint, with no second greeting
// and no tool run twice. The caller's participant leaving and coming back
// (a network change), or the agent's own connection to the server
// dropping, is a lost connection (TransportLost, TransportRestored), not
// a new call: the session waits its resume window (WithResumeTTL).
package livekit

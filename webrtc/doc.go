// Package webrtc connects browsers (and any WebRTC client) to Holdline
// sessions, on pion/webrtc.
//
// A Transport answers SDP offers the WHIP way: one offer in, one complete
// answer out, no trickled candidates, so an HTTP handler can do the whole
// exchange in a single request. Each answer makes a Peer:
//
//   - caller audio arrives as Opus, is decoded (lost packets concealed),
//     resampled and cut into the pipeline's 20 ms frames at 16 kHz;
//   - the agent's audio, written by the session's paced player, is
//     resampled to 48 kHz and Opus-encoded one packet per 20 ms frame, with
//     RTP timestamps that follow the wall clock through silences. Nothing
//     is queued here, so a barge-in that flushes the player stops the
//     caller's audio at the next packet;
//   - a data channel named "holdline" carries messages both ways (the
//     server package puts events, captions and typed input on it).
//
// A Peer never blocks the session: a write to a closed or congested peer is
// dropped and counted, never returned to the player as an error.
package webrtc

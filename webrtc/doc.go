// Package webrtc connects browsers (and any WebRTC client) to Holdline
// sessions, on pion/webrtc.
//
// A Transport answers SDP offers the WHIP way: one offer in, one complete
// answer out, no trickled candidates, so an HTTP handler can do the whole
// exchange in a single request. Each answer makes a Peer, whose audio
// goes through package media/opusrtp both ways:
//
//   - caller audio arrives as Opus and goes into an adaptive jitter buffer
//     of encoded packets (package media/rtpjitter: 40 ms to start, up to
//     200 ms, as the network's jitter needs), so that a reordered packet
//     is put back in order and a lost one is decoded from the next
//     packet's in-band FEC, or concealed for at most 100 ms. The peer's own
//     20 ms clock decodes straight at the pipeline's 16 kHz and hands the
//     session a frame every period from the first packet on; a sender's
//     pause is silence, not loss. Stats counts what the network did
//     (Lost, FECRecovered, Concealed, Late, Duplicates) and the delay the
//     buffer adds now (JitterDelay);
//   - the agent's audio, written by the session's paced player, is
//     Opus-encoded at the player's own rate (Opus takes 8, 12, 16, 24 and
//     48 kHz as they are; other rates are resampled to 48 kHz), one packet
//     per 20 ms, on Opus's 48 kHz RTP clock. Nothing is queued here, so a
//     barge-in that flushes the player stops the caller's audio at the
//     next packet. The encoder adds in-band FEC in proportion to the loss
//     the client's RTCP reports show (at most 30%);
//   - silence is not sent for long: after ten packets of digital silence
//     (200 ms, so a cut ends in silence rather than in the client's
//     concealment of the last sound) the sender pauses, as Opus DTX would,
//     and the next sound starts a talkspurt (marker bit, timestamp moved on
//     by the wall clock). An idle call costs neither encoder nor network;
//   - a data channel named "holdline" carries messages both ways (the
//     server package puts events, captions and typed input on it).
//
// Behind a NAT, peers gather with STUN and TURN servers: fixed ones
// (WithICEServer, in the W3C RTCIceServer form ParseICEServers reads) or a
// TURN server sharing a secret (WithTURNSecret), whose credentials are
// minted per peer and expire. Transport.ICEServers gives a client the same
// servers, to configure its own side with. Gathering waits at most a
// second for a STUN server and the gather timeout for the rest, then
// answers with what it has.
//
// A Peer never blocks the session: a write to a closed or congested peer is
// dropped and counted, never returned to the player as an error.
//
// Opus is libopus through cgo (github.com/hraban/opus): building needs a C
// compiler and the Debian packages libopus-dev, libopusfile-dev and
// pkg-config ("make deps" installs them), and a program built with it
// needs libopus0 and libopusfile0 where it runs.
package webrtc

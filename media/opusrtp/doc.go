// Package opusrtp carries a call's audio as Opus over RTP, both ways, for
// the transports whose media is WebRTC (package webrtc for browsers,
// package livekit for LiveKit rooms): one implementation of the jitter
// buffer, the loss recovery and the agent's packetising, whoever carries
// the packets.
//
// A Receiver takes the caller's packets as they arrive into an adaptive
// jitter buffer of encoded packets (package media/rtpjitter: 40 ms to
// start, up to 200 ms, as the network's jitter needs), so that a
// reordered packet is put back in order and a lost one is decoded from
// the next packet's in-band FEC, or concealed for at most 100 ms. Its own
// 20 ms clock decodes straight at the pipeline's rate and hands out a
// frame every period from the first packet on; a sender's pause is
// silence, not loss.
//
// A Sender is a media.Sink for the session's paced player: it encodes the
// agent's frames at their own rate where Opus takes it, one packet per
// 20 ms, queues nothing (a barge-in that flushes the player stops the
// audio at the next packet), pauses after 200 ms of digital silence as
// Opus DTX would, and adds in-band FEC in proportion to the loss the far
// end reports.
//
// Opus is libopus through cgo (github.com/hraban/opus): building needs a C
// compiler and the Debian packages libopus-dev, libopusfile-dev and
// pkg-config.
package opusrtp

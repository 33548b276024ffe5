// Package rtpjitter is an adaptive receive jitter buffer of encoded RTP
// packets: it takes the packets of one stream in whatever order and with
// whatever delay the network delivered them, and hands them back in order,
// on the receiver's own playout clock, each at its time.
//
// It keeps packets encoded, rather than decoded audio as package
// media/jitter does, because a codec with in-band forward error
// correction (Opus) can rebuild a lost packet from the one after it: when
// packet N is missing at its playout time and N+1 is held, the buffer says
// so (Recover) and hands out N+1's payload for the decoder's FEC. With
// nothing to recover from it says Conceal (the decoder's loss concealment),
// for a bounded time, and then Silence.
//
// The delay it adds adapts. It starts at 40 ms, rises at once to cover the
// largest lateness it sees (a packet that arrived later than the fastest
// ones by that much, reordered or late), and falls slowly, after a quiet
// spell, down to 20 ms; it never exceeds its maximum (200 ms by default).
// The playout clock gains delay by inserting a concealed frame (or a
// silent one, in a pause) and loses it by skipping one, at most one frame
// per second while the caller speaks. A packet that arrives after its slot
// was played is late: dropped and counted, and its lateness raises the
// delay so the next one is not.
//
// Senders pause: Opus DTX, a muted microphone, a server that stops sending
// silence. A pause keeps its sequence numbers contiguous while the
// timestamps jump, so the buffer tells it from a loss: a pause is played as
// silence, never counted lost, and concealed no longer than any gap. A
// timestamp or sequence jump of more than a second restarts the stream.
//
// Storage is a ring of 64 packets, so a stream can never hold more than
// that, however its sender behaves; a packet further ahead than the
// maximum delay is dropped as overflow.
package rtpjitter

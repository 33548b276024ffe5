// Package dtmf reads and writes RFC 4733 telephone-events, the RTP payload
// that carries DTMF key presses (the digits 0-9, * and #, and A-D) beside a
// call's audio.
//
// A caller on a phone leg answers an IVR by pressing keys, and most SIP
// endpoints do not put those tones in the audio, where a codec would mangle
// them, but send them as telephone-event packets: one start packet, updates
// while the key is held, and an end packet sent three times, all with the
// event's RTP timestamp. Packets get lost and repeated, so turning them into
// key presses takes some care; the Detector reports each press exactly once,
// as soon as its first packet arrives. Packets builds the packet sequence of
// a key press, for sending DTMF and for tests.
package dtmf

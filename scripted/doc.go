// Package scripted provides deterministic providers for tests, the simulator
// and offline demos: an [LLM] that answers from a script, a [TTS] that speaks
// a quiet tone with exact word timings, and an [STT] that recognises whatever
// it was told the caller will say.
//
// Each provider has controllable time to first byte, rate and failures. All
// waiting is done with timers from the time package that race the context,
// so under testing/synctest the providers run on the bubble's fake clock and
// their timing can be asserted exactly: with a 300 ms time to first byte the
// first chunk arrives 300 ms after the request, not roughly then.
//
// Schedules are fixed when a stream starts and are measured from that
// moment, as for a network stream whose bytes arrive whether or not anyone
// reads them: a consumer that falls behind finds the overdue pieces ready at
// once, and timing never drifts with the consumer's speed.
package scripted

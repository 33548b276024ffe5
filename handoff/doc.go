// Package handoff defines the snapshot a session travels in when it leaves
// its process: to another worker after a crash or a transfer, through a
// checkpoint store, or in a SIP REFER's X-Holdline-Handoff header.
//
// A [Snapshot] is a versioned JSON document: the session's engine.State
// (active agent, chat context, tool ledger with in-flight, deferred and
// unknown calls and their idempotency keys, user data, epoch) and the
// transport's metadata. [Seal] signs it with HMAC-SHA256 under a key from
// configuration; [Open] refuses anything it cannot vouch for, with an
// error that says which check failed: a bad signature (ErrSignature), an
// unknown version (ErrVersion), a field missing or out of range
// (ErrInvalid), or bytes that are not a sealed snapshot at all
// (ErrMalformed). Nothing is half-loaded: Open returns a whole snapshot or
// none.
//
// # Format, version 1
//
// A sealed snapshot is the JSON object
//
//	{"v":1,"alg":"HS256","kid":"KEY-ID","body":BASE64URL,"sig":BASE64URL}
//
// where body is the snapshot's JSON (below) and sig is HMAC-SHA256 over
// "holdline-snapshot.v1." followed by the body's bytes. The body:
//
//	{
//	  "version": 1,
//	  "created_at": RFC 3339 time,
//	  "state": {
//	    "session_id": "...",      // required; idempotency keys include it
//	    "agent": "...",           // required: the agent to resume as
//	    "epoch": N, "next_call": N,
//	    "chat": [llm.Item...],    // messages and tool calls as heard
//	    "calls": [tools.Call...], // every call: id, tool, args, key,
//	                              // effect, policy, epoch, state, output,
//	                              // ran, committed, reused_from, late
//	    "user_data": {"key": JSON...},
//	    "seq": N                  // the last event the state covers
//	  },
//	  "transport": {"kind": "sip" | "webrtc" | ..., "...": "..."}
//	}
//
// Secrets never go in a snapshot: the state holds the conversation and
// the ledger, not provider keys, and transports put only routing facts in
// Transport.
package handoff

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// bench latency --runtime livekit, run for two turns against LiveKit
// Agents for Node (the full comparison is the manual "holdline bench
// latency --runtime both"): every turn is measured, each at least the floor
// LiveKit's own endpointing and the providers set, its stages in the order
// they happen and each provider no faster than it was told.
//
// It needs node and npm, npm-installs test/latency-livekit and, the first
// time, builds livekit-server into the cache (minutes), so make test does
// not run it: it runs only with HOLDLINE_LIVEKIT_BENCH=1 in the
// environment.
func TestBenchLatencyLivekitMeasuresEveryTurnAboveTheFloor(t *testing.T) {
	if os.Getenv("HOLDLINE_LIVEKIT_BENCH") != "1" {
		t.Skip("runs LiveKit Agents for Node and livekit-server (node, npm, minutes the first time): set HOLDLINE_LIVEKIT_BENCH=1 to run it")
	}
	needEspeak(t)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	var out, errs bytes.Buffer
	if err := run(ctx, []string{"bench", "latency", "--runtime", "livekit", "--turns", "2", "--json"}, nil, &out, &errs); err != nil {
		t.Fatalf("bench latency --runtime livekit: %v\n%s", err, errs.String())
	}
	t.Logf("progress:\n%s", errs.String())
	var comp benchComparison
	if err := json.Unmarshal(out.Bytes(), &comp); err != nil {
		t.Fatalf("the JSON: %v\n%s", err, out.String())
	}
	if comp.Agent != "booking" || comp.Turns != 2 || len(comp.Runtimes) != 1 {
		t.Fatalf("agent %q, %d turns, %d runtimes; want booking, 2 and 1", comp.Agent, comp.Turns, len(comp.Runtimes))
	}
	rep := comp.Runtimes[0]
	if rep.Runtime != "livekit" || !rep.Speculate || rep.Turns != 2 || rep.Measured != 2 || len(rep.PerTurn) != 2 || len(rep.Stages) != len(livekitPreemptiveStages) {
		t.Fatalf("runtime %q (preemptive %v): %d of %d turns measured, %d turns and %d stages reported; want livekit (preemptive), 2 of 2, 2 and %d",
			rep.Runtime, rep.Speculate, rep.Measured, rep.Turns, len(rep.PerTurn), len(rep.Stages), len(livekitPreemptiveStages))
	}
	set := comp.Settings
	// The floor of the shortest first phrase, one token: the turn ends
	// minDelay after the speech at the soonest, and the voice is asked
	// only then.
	least := max(set["endpointing"], set["silence"]+set["transcription"]+set["ttft"]) + set["speech_first_audio"]
	for i, turn := range rep.PerTurn {
		if turn.Error != "" || turn.Said != benchCallerLines[i] {
			t.Errorf("turn %d: said %q, error %q; want %q measured", i+1, turn.Said, turn.Error, benchCallerLines[i])
			continue
		}
		if turn.FloorMS < least || turn.HeardMS < turn.FloorMS || turn.FirstPhrase == "" || turn.FirstPhraseTokens < 1 {
			t.Errorf("turn %d: heard after %v ms, floor %v ms (at least %v), first phrase %q of %d tokens", i+1, turn.HeardMS, turn.FloorMS, least, turn.FirstPhrase, turn.FirstPhraseTokens)
		}
		at := turn.AtMS
		if at["heard"] != turn.HeardMS {
			t.Errorf("turn %d: heard at %v ms in the stages, %v ms in the turn", i+1, at["heard"], turn.HeardMS)
		}
		// The stages that follow one another: the words, then the model
		// (asked preemptively, before the turn ended or as it did), and
		// the voice only once the turn has ended.
		for _, chain := range [][]string{
			{"speech_stopped", "transcription_sent", "transcription_answered", "transcript", "chat_request", "first_token", "speech_request", "first_audio_sent", "playout_started", "heard"},
			{"transcript", "user_turn", "speech_request"},
		} {
			for k := 1; k < len(chain); k++ {
				if at[chain[k]] < at[chain[k-1]] {
					t.Errorf("turn %d: %s at %v ms, before %s at %v ms", i+1, chain[k], at[chain[k]], chain[k-1], at[chain[k-1]])
				}
			}
		}
		for _, p := range []struct {
			from, to string
			least    float64
		}{
			{"transcription_sent", "transcription_answered", set["transcription"]},
			{"chat_request", "first_token", set["ttft"]},
			{"speech_request", "first_audio_sent", set["speech_first_audio"]},
		} {
			if d := at[p.to] - at[p.from]; d < p.least-1 {
				t.Errorf("turn %d: %s %v ms after %s; the provider was told to take %v ms", i+1, p.to, d, p.from, p.least)
			}
		}
		if at["user_turn"] < set["endpointing"] {
			t.Errorf("turn %d: the turn ended %v ms after the speech, within the endpointing of %v ms", i+1, at["user_turn"], set["endpointing"])
		}
	}
}

// LiveKit's floor follows its endpointing: minDelay counts from the end of
// the speech and the turn waits for the words; preemptive generation asks
// the model once the words are in, the voice once the turn has ended.
func TestLivekitFloorFollowsItsEndpointing(t *testing.T) {
	set := latencySettings{ttft: 300 * time.Millisecond, tokenInterval: 20 * time.Millisecond, speechFirstAudio: 200 * time.Millisecond,
		transcription: 150 * time.Millisecond, endpointing: 500 * time.Millisecond, silence: 300 * time.Millisecond}
	for _, tc := range []struct {
		preemptive bool
		tokens     int
		follows    bool
		want       time.Duration
	}{
		// The turn ends at max(500, 300+150) = 500; 300 + 5×20 + 200.
		{false, 6, false, 1100 * time.Millisecond},
		{false, 6, true, 1120 * time.Millisecond},
		// The words at 450, the phrase at 450 + 300 + 100 = 850, past the
		// turn's end; + 200.
		{true, 6, false, 1050 * time.Millisecond},
		{true, 1, false, 950 * time.Millisecond},
	} {
		if got := livekitFloor(set, tc.preemptive, tc.tokens, tc.follows); got != tc.want {
			t.Errorf("livekitFloor(preemptive %v, %d tokens, follows %v) = %v, want %v", tc.preemptive, tc.tokens, tc.follows, got, tc.want)
		}
	}
	set.endpointing = 2 * time.Second
	if got, want := livekitFloor(set, true, 6, false), 2200*time.Millisecond; got != want {
		t.Errorf("with a 2 s minDelay the voice waits for the turn: %v, want %v", got, want)
	}
}

func TestBenchLatencyRefusesARuntimeItDoesNotKnow(t *testing.T) {
	needEspeak(t) // the caller's lines are spoken before the runtime starts
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "latency", "--runtime", "pipecat"}, `--runtime "pipecat": want one of holdline, livekit, both`},
		{[]string{"bench", "latency", "--runtime", "livekit", "--agent", "pizza"}, "has no LiveKit twin"},
	} {
		var out, errs bytes.Buffer
		err := run(t.Context(), tc.args, nil, &out, &errs)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want an error saying %q", tc.args, err, tc.want)
		}
	}
}

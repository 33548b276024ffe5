package cli

import (
	"cmp"
	"fmt"
	"io"
	"math"
	goruntime "runtime"
	"slices"
	"time"
)

// ms is d in milliseconds, to a tenth.
func ms(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Millisecond)*10) / 10 }

// latencyReport is what bench latency prints, as a table or as JSON.
type latencyReport struct {
	Agent    string `json:"agent"`
	Cores    int    `json:"cores"`
	Turns    int    `json:"turns"`
	Measured int    `json:"measured"`
	// Settings are the latencies the providers were given and the
	// endpointing, in ms.
	Settings map[string]float64 `json:"settings_ms"`
	// Speculate: the model was asked as soon as the caller's words were
	// in (runtime.WithSpeculation).
	Speculate bool `json:"speculate"`
	// Engines are the agent's: openai (against openaitest, with the
	// latencies in Settings) or local (their own; Floor is then 0).
	Engines string `json:"engines"`
	Note    string `json:"note,omitempty"`
	// VoiceToVoice is from the end of the caller's speech to the agent's
	// first audio heard; Floor the least the providers and the
	// endpointing allow; HoldlineShare the difference, turn by turn.
	VoiceToVoice  latencyStats `json:"voice_to_voice"`
	Floor         latencyStats `json:"floor"`
	HoldlineShare latencyStats `json:"holdline_share"`
	// Overhead is Holdline's own share as each turn's breakdown counts
	// it (events.Turn.Overhead).
	Overhead latencyStats   `json:"overhead"`
	Stages   []latencyStage `json:"stages"`
	PerTurn  []latencyTurn  `json:"per_turn"`
}

// latencyStats are a measurement over the turns measured, in ms.
type latencyStats struct {
	P50 float64 `json:"p50_ms"`
	P95 float64 `json:"p95_ms"`
	Max float64 `json:"max_ms"`
}

// latencyStage is one stage over the turns measured: when it happened
// after the end of the caller's speech, and how long it took after the
// stage before.
type latencyStage struct {
	Name   string `json:"name"`
	Source string `json:"source"` // event, server or client
	What   string `json:"what"`
	// After is the stage it follows, which Step is timed from ("": the
	// end of the speech).
	After string       `json:"after,omitempty"`
	At    latencyStats `json:"at"`
	Step  latencyStats `json:"step"`
	// SharePct is the step's p50 as a share of voice-to-voice's p50.
	SharePct float64 `json:"share_pct"`
}

func (r *latencyRun) report(agent, note string) latencyReport {
	s := r.settings
	rep := latencyReport{
		Agent: agent,
		Cores: goruntime.NumCPU(),
		Turns: s.turns,
		Settings: map[string]float64{
			"ttft":               ms(s.ttft),
			"token_interval":     ms(s.tokenInterval),
			"speech_first_audio": ms(s.speechFirstAudio),
			"transcription":      ms(s.transcription),
			"endpointing":        ms(s.endpointing),
		},
		Speculate: s.speculate,
		Engines:   "openai",
		Note:      note,
		PerTurn:   r.turns,
	}
	if s.local {
		rep.Engines, rep.Settings = "local", map[string]float64{"endpointing": ms(s.endpointing)}
	}
	var heard, floor, share, overhead []float64
	at := map[string][]float64{}
	step := map[string][]float64{}
	for _, t := range r.turns {
		if !t.measured() {
			continue
		}
		rep.Measured++
		heard = append(heard, t.HeardMS)
		floor = append(floor, t.FloorMS)
		share = append(share, t.HeardMS-t.FloorMS)
		overhead = append(overhead, t.OverheadMS)
		for _, st := range s.stages() {
			v := t.AtMS[st.name]
			at[st.name] = append(at[st.name], v)
			step[st.name] = append(step[st.name], math.Round((v-t.AtMS[st.after])*10)/10)
		}
	}
	rep.VoiceToVoice, rep.Floor, rep.HoldlineShare, rep.Overhead = stats(heard), stats(floor), stats(share), stats(overhead)
	for _, st := range s.stages() {
		ls := latencyStage{Name: st.name, Source: st.source, What: st.what, After: st.after,
			At: stats(at[st.name]), Step: stats(step[st.name])}
		if rep.VoiceToVoice.P50 > 0 {
			ls.SharePct = math.Round(ls.Step.P50/rep.VoiceToVoice.P50*1000) / 10
		}
		rep.Stages = append(rep.Stages, ls)
	}
	// In the order they happened, on the whole.
	slices.SortStableFunc(rep.Stages, func(a, b latencyStage) int { return cmp.Compare(a.At.P50, b.At.P50) })
	return rep
}

// stats are the nearest-rank p50 and p95 and the maximum of xs.
func stats(xs []float64) latencyStats {
	if len(xs) == 0 {
		return latencyStats{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := func(p float64) float64 { return s[max(int(math.Ceil(p*float64(len(s))))-1, 0)] }
	return latencyStats{P50: rank(0.5), P95: rank(0.95), Max: s[len(s)-1]}
}

// writeLatencyTable prints rep as the command's table.
func writeLatencyTable(w io.Writer, rep latencyReport) {
	set := rep.Settings
	fmt.Fprintf(w, "Voice-to-voice latency: the %s agent, %d of %d turns measured, on %d cores\n", rep.Agent, rep.Measured, rep.Turns, rep.Cores)
	spec := "on"
	if !rep.Speculate {
		spec = "off"
	}
	if rep.Engines == "local" {
		fmt.Fprintf(w, "engines: local (pocketsphinx, espeak-ng, the agent's own model), at their own pace; endpointing %s; speculation %s\n\n", msText(set["endpointing"]), spec)
	} else {
		fmt.Fprintf(w, "providers: first token %s, then a token every %s; speech first audio %s; transcription %s; endpointing %s; speculation %s\n\n",
			msText(set["ttft"]), msText(set["token_interval"]), msText(set["speech_first_audio"]), msText(set["transcription"]), msText(set["endpointing"]), spec)
	}
	const summary = "%-42s %9s %9s %9s\n"
	fmt.Fprintf(w, summary, "", "p50", "p95", "max")
	row := func(name string, s latencyStats) {
		fmt.Fprintf(w, summary, name, msText(s.P50), msText(s.P95), msText(s.Max))
	}
	row("end of speech → first audio heard", rep.VoiceToVoice)
	row("Holdline's own overhead (turn_metrics)", rep.Overhead)
	if rep.Engines == "local" {
		fmt.Fprintln(w)
		writeStageTable(w, "", rep.Stages)
		fmt.Fprintln(w, "\nat: after the end of the caller's speech; step: after the stage it follows; share: of the step p50s up to heard")
		return
	}
	row("floor set by the providers and endpointing", rep.Floor)
	row("Holdline's share beyond the floor", rep.HoldlineShare)
	var tokens []int
	for _, t := range rep.PerTurn {
		if t.measured() {
			tokens = append(tokens, t.FirstPhraseTokens)
		}
	}
	if rep.Speculate {
		fmt.Fprintln(w, "\nfloor = silence heard (300 ms) + max(endpointing, transcription + answer), the model asked as soon as the words are in")
	} else {
		fmt.Fprintln(w, "\nfloor = silence heard (300 ms) + max(endpointing, transcription) + answer, the model asked when the turn has ended")
	}
	fmt.Fprint(w, "answer = ttft + token interval × (the first phrase's tokens − 1, + 1 when more of the answer follows it) + speech first audio")
	if len(tokens) > 0 {
		fmt.Fprintf(w, "; first phrases of %d to %d tokens", slices.Min(tokens), slices.Max(tokens))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
	writeStageTable(w, "", rep.Stages)
	fmt.Fprintln(w, "\nat: after the end of the caller's speech; step: after the stage it follows")
}

// writeStageTable prints stages, a row each, every line after indent.
func writeStageTable(w io.Writer, indent string, stages []latencyStage) {
	stage := indent + "%-22s %-6s %9s %9s %9s %9s %9s %6s   %-22s"
	fmt.Fprintf(w, stage+"\n", "stage", "from", "at p50", "p95", "max", "step p50", "p95", "share", "step after")
	for _, s := range stages {
		after := s.After
		if after == "" {
			after = "end of speech"
		}
		fmt.Fprintf(w, stage+" %s\n", s.Name, s.Source, msText(s.At.P50), msText(s.At.P95), msText(s.At.Max), msText(s.Step.P50), msText(s.Step.P95),
			fmt.Sprintf("%.0f%%", s.SharePct), after, s.What)
	}
}

// msText is a duration in ms as the table prints it.
func msText(v float64) string {
	if v > -10 && v < 10 {
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.0f ms", v)
}

package examples_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/examples"
	"github.com/holdline/holdline/examples/support"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/tts"
)

// The example agents' own answers, as the voice is asked for them: every
// word is in exactly one request, in order (none split across two), each
// request ends at the end of a sentence, except the first phrase of an
// answer, which may end at a comma, colon, semicolon or dash once it has
// tts.DefaultMinFirstPhraseWords words, and the answer's last phrase. The
// phrases are logged, to be read.
func TestExampleAnswersGoToTheVoiceInPhrasesThatSoundRight(t *testing.T) {
	conversations := []struct {
		agent string
		lines []string
	}{
		{"booking", []string{"Book a table for two at seven", "What did I book?", "Cancel the booking."}},
		{"pizza", []string{"What's on the menu?", "How much is the pepperoni?", "Two pepperoni please.", "Yes.", "Can I talk to a person?", "Goodbye."}},
		{"support", []string{"I was charged twice on account A7.", "Yes, refund one please."}},
	}
	var demo examples.Demo
	for _, conv := range conversations {
		t.Run(conv.agent, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				voice, err := scripted.NewTTS()
				if err != nil {
					t.Fatal(err)
				}
				var agent *runtime.Agent
				if conv.agent == "support" {
					agent = support.New(support.WithTTS(voice)).FrontDesk
				} else {
					a, release, err := demo.Agents()[conv.agent](context.Background())
					if err != nil {
						t.Fatal(err)
					}
					if release != nil {
						defer release()
					}
					agent = a
					agent.TTS = voice
				}
				said := talk(t, agent, conv.lines)
				checkPhrases(t, said, voice.Texts())
			})
		})
	}
}

// talk has the caller say lines to agent, each once the agent is idle,
// and returns the agent's answers as it said them.
func talk(t *testing.T, agent *runtime.Agent, lines []string) []string {
	t.Helper()
	s, err := runtime.New(agent)
	if err != nil {
		t.Fatal(err)
	}
	sub := s.Subscribe(1 << 12)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var said []string
	wait := func() {
		t.Helper()
		timeout := time.After(time.Minute)
		for {
			select {
			case e := <-sub.C():
				switch e.Kind {
				case events.PlayoutDone:
					said = append(said, e.Text)
				case events.Idle:
					return
				case events.SessionEnded:
					return
				}
			case <-timeout:
				t.Fatal("the agent never went idle")
			}
		}
	}
	wait() // the greeting
	for _, line := range lines {
		if err := s.Inject(ctx, line); err != nil {
			break // the agent ended the call
		}
		wait()
	}
	cancel()
	<-done
	return said
}

// checkPhrases checks the voice's requests against the answers said.
func checkPhrases(t *testing.T, said, phrases []string) {
	t.Helper()
	var want, got []string
	for _, s := range said {
		want = append(want, strings.Fields(s)...)
	}
	for _, p := range phrases {
		got = append(got, strings.Fields(p)...)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("the voice was asked for other words than the answers hold:\nasked: %q\nsaid:  %q", phrases, said)
	}
	// Walk the answers phrase by phrase: a phrase is an answer's first,
	// middle or last.
	i := 0
	for _, answer := range said {
		words := len(strings.Fields(answer))
		for first := true; words > 0 && i < len(phrases); first = false {
			p := phrases[i]
			i++
			n := len(strings.Fields(p))
			words -= n
			last := words <= 0
			end := []rune(strings.TrimRightFunc(p, func(r rune) bool { return strings.ContainsRune(`"')]”’»`, r) }))
			mark := end[len(end)-1]
			switch {
			case strings.ContainsRune(".!?…", mark), last:
			case first && strings.ContainsRune(",;:—–-", mark) && n >= tts.DefaultMinFirstPhraseWords:
			default:
				t.Errorf("phrase %q of answer %q ends at %q, neither a sentence's end nor a first phrase's clause", p, answer, mark)
			}
			if unicode.IsLower([]rune(p)[0]) && first {
				t.Errorf("answer %q begins with a phrase in lower case: %q", answer, p)
			}
			if first {
				t.Logf("first phrase %q (%d words) of %q", p, n, answer)
			}
		}
	}
}

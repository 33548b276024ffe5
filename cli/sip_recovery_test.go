package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/holdline/holdline/handoff"
	"github.com/holdline/holdline/internal/baresiptest"
	"github.com/holdline/holdline/internal/freeport"
	"github.com/holdline/holdline/internal/redistest"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/store"
	"github.com/holdline/holdline/tools"
)

// sipKillPoints are where a phone trial kills the worker holding the
// call, judged from what the worker has written to the store.
var sipKillPoints = []struct {
	name string
	at   func(v callView) bool
}{
	{"the caller's request saved", func(v callView) bool {
		return slices.ContainsFunc(v.state.Chat, func(it llm.Item) bool { return it.Role == llm.RoleUser })
	}},
	{"between intent and outcome", func(v callView) bool {
		return bookedInJournal(v.journal, false) && !bookedInJournal(v.journal, true)
	}},
	{"after the outcome", func(v callView) bool { return bookedInJournal(v.journal, true) }},
	// The confirmation is being spoken (no checkpoint is written
	// mid-sentence: the time since the outcome tells).
	{"mid-playout", func(v callView) bool { return v.sinceOutcome > 1500*time.Millisecond }},
}

// callView is a call as the store has it.
type callView struct {
	state   engine.State
	journal []tools.Record
	// sinceOutcome is how long ago book_table's outcome was first seen
	// in the journal (0 before).
	sinceOutcome time.Duration
}

// bookedInJournal reports whether j has book_table's intent (outcome
// false) or its outcome.
func bookedInJournal(j []tools.Record, outcome bool) bool {
	return slices.ContainsFunc(j, func(r tools.Record) bool { return r.Tool == "book_table" && (r.State != "") == outcome })
}

// Two `holdline serve --sip` workers share a real Redis. In each trial
// baresip, a real softphone, calls one worker and asks the booking agent
// (pocketsphinx, espeak-ng) for a table; the worker is killed with
// SIGKILL at one of the kill points; the caller hangs up and dials the
// other worker from the same line. Every call must be picked up there,
// no booking may be made twice and no turn a checkpoint had saved may be
// lost. HOLDLINE_SIP_KILL_TRIALS=N sets the number of trials (default:
// one per kill point).
func TestKilledWorkersPhoneCallsArePickedUpOnRedial(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	baresip := baresiptest.Need(t)
	trials := len(sipKillPoints)
	if n, _ := strconv.Atoi(os.Getenv("HOLDLINE_SIP_KILL_TRIALS")); n > 0 {
		trials = n
	}
	rd := redistest.Start(t)
	dir := t.TempDir()
	bin := buildHoldline(t, dir)
	bookings := dir + "/bookings.jsonl"
	var sipAddrs [2]string
	startSIPWorker := func(i int, name string) *worker {
		port, err := freeport.UDP()
		if err != nil {
			t.Fatal(err)
		}
		sipAddrs[i] = fmt.Sprintf("127.0.0.1:%d", port)
		return startWorker(t, bin, name, rd.URL(), bookings, dir, "--sip", "udp:"+sipAddrs[i])
	}
	workers := [2]*worker{startSIPWorker(0, "w0"), startSIPWorker(1, "w1")}
	t.Setenv(snapshotKeyEnv, workerSnapshotKey)
	ctx := context.Background()
	st, key, err := openStore(ctx, rd.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	opt, err := goredis.ParseURL(rd.URL())
	if err != nil {
		t.Fatal(err)
	}
	rc := goredis.NewClient(opt)
	defer rc.Close()

	tr := &phoneTrials{t: t, baresip: baresip, st: st, key: key, rc: rc}
	var answers, speaking, heard []time.Duration
	var lost, failed int
	for i := range trials {
		point := sipKillPoints[i%len(sipKillPoints)]
		from, to := i%2, (i+1)%2
		res, err := tr.run(fmt.Sprintf("caller-%d", i), workers[from], sipAddrs[from], sipAddrs[to], point.at)
		if err != nil {
			failed++
			log, _ := os.ReadFile(workers[to].log)
			t.Errorf("trial %d (%s): %v\nthe other worker's log:\n%s", i, point.name, err, log)
		} else {
			answers = append(answers, res.answered)
			speaking = append(speaking, res.speaking)
			heard = append(heard, res.answered+res.speaking)
		}
		lost += res.lost
		workers[from] = startSIPWorker(from, fmt.Sprintf("w%d-%d", from, i))
	}
	dups := duplicateBookings(t, bookings)
	t.Logf("%d phone kill trials: %d picked up on redial, %d failed; bookings made twice: %d; saved turns lost: %d; "+
		"redial to the answer p50 %v, p95 %v, max %v (the dead worker's lease runs out first); "+
		"answer to the agent speaking p50 %v, p95 %v, max %v; redial to hearing the agent p50 %v, p95 %v, max %v",
		trials, len(answers), failed, dups, lost,
		quantile(answers, 0.5), quantile(answers, 0.95), quantile(answers, 1),
		quantile(speaking, 0.5), quantile(speaking, 0.95), quantile(speaking, 1),
		quantile(heard, 0.5), quantile(heard, 0.95), quantile(heard, 1))
	if dups != 0 {
		t.Errorf("%d bookings were made twice", dups)
	}
	if lost != 0 {
		t.Errorf("%d saved turns were lost", lost)
	}
}

// workerSnapshotKey is the snapshot key every worker of the kill tests
// shares.
const workerSnapshotKey = "a key every worker of the test shares"

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))].Round(time.Millisecond)
}

// phoneTrials runs kill trials with baresip as the caller, watching the
// calls through the store the workers share.
type phoneTrials struct {
	t       *testing.T
	baresip string
	st      store.Store
	key     handoff.Key
	rc      *goredis.Client
	seen    map[string]bool // sessions of earlier trials
}

type trialResult struct {
	answered time.Duration // from dialling again to the answer
	speaking time.Duration // from the answer to the agent's first sound
	lost     int
}

// sessions lists the phone sessions with a checkpoint in the store.
func (p *phoneTrials) sessions(ctx context.Context) ([]string, error) {
	keys, err := p.rc.Keys(ctx, "holdline:{sip_*}:checkpoint").Result()
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, k := range keys {
		ids = append(ids, strings.TrimSuffix(strings.TrimPrefix(k, "holdline:{"), "}:checkpoint"))
	}
	return ids, nil
}

// dial starts baresip with home's configuration, dialling addr.
func (p *phoneTrials) dial(ctx context.Context, home, addr string) (*baresiptest.Phone, error) {
	return baresiptest.Start(ctx, p.baresip, home, "-e", "/dial sip:agent@"+addr, "-t", "120")
}

// run is one trial: line calls a at addrA, a dies, line calls addrB.
// Each trial has a line of its own, so that one that fails leaves nothing
// for the next to pick up.
func (p *phoneTrials) run(line string, a *worker, addrA, addrB string, at func(callView) bool) (res trialResult, err error) {
	t := p.t
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if p.seen == nil {
		p.seen = map[string]bool{}
	}

	// The first call: the greeting takes about 7 s; the caller asks
	// after it and stays on the line.
	home1, _ := baresiptest.HomeAs(t, line, "Book a table for two at seven.", 8, 60)
	phone1, err := p.dial(ctx, home1, addrA)
	if err != nil {
		return res, err
	}
	defer phone1.HangUp()
	var id string
	var view callView
	var outcomeAt time.Time
	for {
		select {
		case <-phone1.Done():
			return res, fmt.Errorf("baresip ended (%v) before the kill point:\n%s", phone1.Err(), phone1.Out.String())
		case <-ctx.Done():
			return res, fmt.Errorf("the kill point never came (session %q, state %+v)", id, view.state)
		case <-time.After(20 * time.Millisecond):
		}
		if id == "" {
			ids, err := p.sessions(ctx)
			if err != nil {
				return res, err
			}
			for _, s := range ids {
				if !p.seen[s] {
					id = s
				}
			}
			if id == "" {
				continue
			}
			p.seen[id] = true
		}
		snap, err := handoff.Resume(ctx, p.st, id, p.key)
		if err != nil {
			continue
		}
		if view.journal, err = p.st.Journal(ctx, id); err != nil {
			return res, err
		}
		view.state = snap.State
		if outcomeAt.IsZero() && bookedInJournal(view.journal, true) {
			outcomeAt = time.Now()
		}
		if !outcomeAt.IsZero() {
			view.sinceOutcome = time.Since(outcomeAt)
		}
		if at(view) {
			break
		}
	}
	a.kill()
	phone1.HangUp() // the caller hears the line go dead and hangs up
	saved, err := handoff.Resume(ctx, p.st, id, p.key)
	if err != nil {
		return res, fmt.Errorf("the dead worker's last checkpoint: %w", err)
	}

	// The caller dials again, this time reaching the other worker, and
	// listens.
	home2, _ := baresiptest.HomeAs(t, line, "", 0, 10)
	redialled := time.Now()
	phone2, err := p.dial(ctx, home2, addrB)
	if err != nil {
		return res, err
	}
	defer phone2.HangUp()
	// While the call is up the picked-up session writes its
	// checkpoints: the conversation as the other worker has it.
	var picked engine.State
	for picked.Seq <= saved.State.Seq {
		select {
		case <-phone2.Done():
			return res, fmt.Errorf("the redial ended (%v) without the call being picked up:\n%s", phone2.Err(), phone2.Out.String())
		case <-ctx.Done():
			return res, errors.New("the redialled call never picked the session up")
		case <-time.After(20 * time.Millisecond):
		}
		if snap, err := handoff.Resume(ctx, p.st, id, p.key); err == nil {
			picked = snap.State
		}
	}
	for _, it := range saved.State.Chat {
		if it.Role == llm.RoleUser && !slices.ContainsFunc(picked.Chat, func(p llm.Item) bool { return p.Role == llm.RoleUser && p.Text == it.Text }) {
			res.lost++
		}
	}
	// baresip hangs up when its file ends, and stays running.
	for {
		if _, ended := phone2.Out.When("terminated"); ended {
			break
		}
		select {
		case <-phone2.Done():
		case <-ctx.Done():
			return res, errors.New("the redialled call never ended")
		case <-time.After(50 * time.Millisecond):
			continue
		}
		break
	}
	phone2.HangUp() // its recording is complete once it has exited
	answeredAt, ok := phone2.Out.When("Call established")
	if !ok {
		return res, fmt.Errorf("baresip never saw the redial answered:\n%s", phone2.Out.String())
	}
	heard, err := baresiptest.Heard(home2)
	if err != nil {
		return res, err
	}
	first, ok := baresiptest.FirstSound(heard)
	if !ok {
		return res, errors.New("the agent never spoke on the redialled call")
	}
	res.answered, res.speaking = answeredAt.Sub(redialled), first
	return res, nil
}

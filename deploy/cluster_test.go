package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zaf/g711"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/internal/baresiptest"
	"github.com/holdline/holdline/internal/need"
	"github.com/holdline/holdline/internal/netnstest"
	"github.com/holdline/holdline/webrtc/rtctest"
)

const (
	apiToken    = "cluster-api-token"
	adminToken  = "cluster-admin-token"
	snapshotKey = "a snapshot key for the cluster test"
	// redisPassword is the test's: the shipped redis.conf asks for one.
	redisPassword = "cluster-redis-password"
	httpPort      = 8080
	sipPort       = 5060
)

// size is how many calls a run places: the short version under make
// test, the full one with HOLDLINE_CLUSTER=full.
type size struct {
	webrtc, sip, killCalls int
	baresips               int           // phones that take REFER: moved, not waited for
	sipHold                time.Duration // how long a phone call stays after its request
}

func clusterSize() size {
	if os.Getenv("HOLDLINE_CLUSTER") == "full" {
		return size{webrtc: 20, sip: 60, killCalls: 9, baresips: 3, sipHold: 25 * time.Second}
	}
	return size{webrtc: 6, sip: 12, killCalls: 6, baresips: 1, sipHold: 12 * time.Second}
}

// TestCluster builds the cluster of the README's "Running many workers"
// on this machine: three `holdline serve` workers, each in a network
// namespace of its own with its own address, behind Kamailio and HAProxy
// run from this directory's configurations, sharing a redis-server run
// from its redis.conf, all in an edge namespace; the callers (pion WebRTC
// clients, sipp phones speaking espeak-ng's request) in a fourth. The
// callers' side runs as this test binary again inside that namespace
// (TestClusterInNamespaces): a rolling restart of the three workers under
// live calls, a worker killed with SIGKILL, a worker hung with SIGSTOP.
// HOLDLINE_CLUSTER=full runs 60 phone and 20 browser calls.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a cluster of processes")
	}
	if os.Getenv(netnstest.EnvVar) != "" {
		t.Skip("inside the cluster's namespaces: TestClusterInNamespaces runs there")
	}
	for _, bin := range []string{"kamailio", "kamcmd", "haproxy", "redis-server", "redis-cli", "sipp", "baresip", "espeak-ng", "sox"} {
		if _, err := exec.LookPath(bin); err != nil {
			need.Missingf(t, "%s is missing: make test-deps installs it", bin)
		}
	}
	n := netnstest.New(t)
	for _, name := range []string{"edge", "w1", "w2", "w3", "callers"} {
		n.Add(name)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "holdline")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/holdline").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// The callers stand in for phones and browsers on other machines:
	// they run as this package's tests again, built without the race
	// detector, whose cost would otherwise fall on the workers' cores.
	callers := filepath.Join(dir, "deploy.test")
	if out, err := exec.Command("go", "test", "-c", "-o", callers, ".").CombinedOutput(); err != nil {
		t.Fatalf("go test -c: %v\n%s", err, out)
	}
	cwd, _ := os.Getwd()
	cmd := n.Node("callers").Command(callers, "-test.run=^TestClusterInNamespaces$", "-test.v", "-test.count=1", "-test.timeout=9m")
	cmd.Dir = cwd
	cmd.Env = append(os.Environ(), n.Env(), "HOLDLINE_CLUSTER_BIN="+bin, "HOLDLINE_CLUSTER_DIR="+dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	p, err := n.Node("callers").Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Minute):
		_ = p.Signal(syscall.SIGQUIT)
		<-p.Done()
	}
	t.Logf("in the namespaces:\n%s", out.String())
	if code := p.ExitCode(); code != 0 || !strings.Contains(out.String(), "--- PASS: TestClusterInNamespaces") {
		t.Fatalf("the cluster run failed (exit %d)", code)
	}
}

// cluster is the processes of one run, from the callers' namespace.
type cluster struct {
	t        *testing.T
	n        *netnstest.Net
	bin, dir string
	edge     *netnstest.Node
	bookings string
	front    string // HAProxy: http://EDGE:8080
	proxy    string // Kamailio: EDGE:5060
	ctl      string // Kamailio's control socket
	haSock   string // HAProxy's stats socket
	workers  [3]*worker

	mu      sync.Mutex
	samples []sample // calls per worker over time

	res results
}

// results is what a run measured, for its table.
type results struct {
	phones                                  tally // every sipp run's calls but the ones the kill cut
	browsers, browsersLost, browserBookings int
	moves                                   int
	gaps                                    []time.Duration // each move's time on no worker (rtctest.Move.Gap)
	drains                                  []string
	killHeld, killPicked                    int // phones on the killed worker, picked up on redial
	killBrowsers, killResumed               int
	staleOffers, staleFailed                int           // offers with a just-signalled worker's cookie
	baresips, baresipMoves                  int           // softphones that take REFER, and their moves
	callsMoved                              int           // the workers' logs: "call moved to another worker"
	hungOut, hungBack                       time.Duration // Kamailio
	hungOutHAProxy                          time.Duration
}

type tally struct{ total, ok, failed int }

func (t *tally) add(r sippResult) {
	t.total, t.ok, t.failed = t.total+r.total, t.ok+r.ok, t.failed+r.failed
}

type worker struct {
	name  string
	node  *netnstest.Node
	proc  *netnstest.Proc
	url   string
	log   string
	start int // how many times it was started
}

type sample struct {
	at    time.Duration
	calls [3]int
}

func TestClusterInNamespaces(t *testing.T) {
	n := netnstest.FromEnv(t)
	if n == nil {
		t.Skip("run by TestCluster, inside its network namespaces")
	}
	sz := clusterSize()
	c := &cluster{t: t, n: n, bin: os.Getenv("HOLDLINE_CLUSTER_BIN"), dir: os.Getenv("HOLDLINE_CLUSTER_DIR"), edge: n.Node("edge")}
	c.bookings = filepath.Join(c.dir, "bookings.jsonl")
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		logs, _ := filepath.Glob(filepath.Join(c.dir, "*.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			if len(b) > 6000 {
				b = b[len(b)-6000:]
			}
			t.Logf("%s:\n%s", filepath.Base(l), b)
		}
	})
	c.front = fmt.Sprintf("http://%s:%d", c.edge.Addr, httpPort)
	c.proxy = fmt.Sprintf("%s:%d", c.edge.Addr, sipPort)
	c.startEdge()
	for i := range c.workers {
		name := fmt.Sprintf("w%d", i+1)
		nd := n.Node(name)
		c.workers[i] = &worker{name: name, node: nd, url: fmt.Sprintf("http://%s:%d", nd.Addr, httpPort)}
		c.startWorker(i)
	}
	for i := range c.workers {
		c.waitReady(i)
	}
	c.waitDispatcher(3, 15*time.Second)
	c.waitHAProxy(3, 15*time.Second)
	began := time.Now()
	stopSampling := c.sample(began)
	defer stopSampling()
	pcap := speechPCAP(t, c.dir, "Book a table for two at seven.")

	t.Run("rolling restart", func(t *testing.T) { c.rollingRestart(t, sz, pcap) })
	t.Run("a worker killed", func(t *testing.T) { c.killOne(t, sz, pcap) })
	t.Run("a worker hung", func(t *testing.T) { c.hangOne(t) })

	stopSampling()
	dups, distinct := duplicateBookings(t, c.bookings)
	if dups != 0 {
		t.Errorf("%d bookings were made twice", dups)
	}
	c.report(t, time.Since(began), distinct, dups)
	c.reportSamples(t)
}

// report logs the run's results table.
func (c *cluster) report(t *testing.T, took time.Duration, bookings, dups int) {
	r := c.res
	gaps := slices.Sorted(slices.Values(r.gaps))
	var b strings.Builder
	fmt.Fprintf(&b, "results (%v from the first call)\n", took.Round(time.Second))
	row := func(k, format string, args ...any) { fmt.Fprintf(&b, "  %-40s %s\n", k, fmt.Sprintf(format, args...)) }
	row("phone calls (sipp)", "%d placed, %d completed, %d failed", r.phones.total, r.phones.ok, r.phones.failed)
	row("browser sessions (pion)", "%d, %d lost", r.browsers, r.browsersLost)
	row("calls dropped", "%d", r.phones.failed+r.browsersLost)
	row("bookings", "%d made (%d by browsers, %d by phones heard by pocketsphinx), %d made twice", bookings, r.browserBookings, bookings-r.browserBookings, dups)
	row("browser moves (rolling restart)", "%d", r.moves)
	row("baresip phones moved by REFER", "%d phones, %d moves through Kamailio", r.baresips, r.baresipMoves)
	row("calls moved (workers' logs)", "%d", r.callsMoved)
	row("move gap (time on no worker)", "p50 %v, p95 %v, max %v", quantile(gaps, 0.5), quantile(gaps, 0.95), quantile(gaps, 1))
	row("offers with a drained worker's cookie", "%d, %d failed; HAProxy redispatched %d requests in all (its log's +N)", r.staleOffers, r.staleFailed, redispatched(c.dir))
	for _, d := range r.drains {
		row("drain", "%s", d)
	}
	row("SIGKILL: phones on the worker", "%d, %d picked up on redial through Kamailio", r.killHeld, r.killPicked)
	row("SIGKILL: browsers on the worker", "%d, %d resumed through HAProxy", r.killBrowsers, r.killResumed)
	row("SIGSTOP: out of Kamailio's rotation", "after %v (probe every 1 s, probe timeout 2 s)", r.hungOut.Round(time.Millisecond))
	row("SIGSTOP: out of HAProxy's rotation", "after %v (check every 500 ms, fall 2)", r.hungOutHAProxy.Round(time.Millisecond))
	row("SIGCONT: back in Kamailio's rotation", "after %v", r.hungBack.Round(time.Millisecond))
	t.Log(b.String())
	if bookings-r.browserBookings <= 0 {
		t.Errorf("no phone call booked: the workers did not hear sipp's speech")
	}
}

// rollingRestart drains and restarts each worker in turn under live
// browser and phone calls. Before each drain the browsers on that worker
// ask a question, and the worker is signalled while the answer plays: a
// move waits for the answer to end (a clean point), then the browser
// re-offers through HAProxy (carrying the old worker's cookie) and goes
// on with the next worker.
func (c *cluster) rollingRestart(t *testing.T, sz size, pcap string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	clients := c.dialBrowsers(ctx, t, sz.webrtc)
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	sipp := c.startSipp(t, "phones", sz.sip, 4, sz.sipHold, pcap, nil)
	phones := c.startBaresips(t, sz.baresips)
	time.Sleep(3 * time.Second) // the phone calls up and talking
	movedPhones0 := countLog(c, "call moved to another worker")
	for i, w := range c.workers {
		on := c.askBeforeDrain(ctx, t, clients, i)
		before := c.sessions(i)
		took, code := c.drainAndRestart(t, i, func() { c.offerWithStaleCookie(ctx, t, i) })
		c.res.drains = append(c.res.drains, fmt.Sprintf("%s %v (%d calls: %d browsers, each just asked a question)", w.name, took.Round(time.Millisecond), before, on))
		t.Logf("%s drained %d calls (%d browsers, each just asked a question) in %v (exit %d) and is back", w.name, before, on, took.Round(time.Millisecond), code)
		if code != 0 {
			t.Errorf("%s exited %d after its drain; want 0", w.name, code)
		}
	}
	res := sipp.wait(t, 3*time.Minute)
	c.res.phones.add(res)
	t.Logf("phones: %d calls, %d completed, %d failed", res.total, res.ok, res.failed)
	// The phones that take REFER went with the moves.
	for i, ph := range phones {
		established := strings.Count(ph.out.String(), "Call established")
		select {
		case <-ph.proc.Done():
			t.Errorf("baresip %d ended during the restarts:\n%s", i, ph.out.String())
		default:
		}
		t.Logf("baresip %d: its call established %d times (moved %d times)", i, established, established-1)
		c.res.baresips++
		c.res.baresipMoves += max(established-1, 0)
		if established < 2 {
			t.Errorf("baresip %d was never moved:\n%s", i, ph.out.String())
		}
		_ = ph.proc.Signal(syscall.SIGTERM)
	}
	c.res.callsMoved = countLog(c, "call moved to another worker") - movedPhones0
	t.Logf("calls moved in all: %d", c.res.callsMoved)
	if res.failed != 0 || res.ok != sz.sip {
		t.Errorf("%d of %d phone calls failed through the rolling restart\n%s", res.failed, sz.sip, res.out)
	}
	lost := 0
	for i, cl := range clients {
		select {
		case <-cl.HungUp():
			lost++
			t.Errorf("browser %d was hung up on", i)
			continue
		default:
		}
		levels := cl.Levels()
		for j, m := range cl.Moves() {
			if m.Err != nil {
				lost++
				t.Errorf("browser %d's move failed: %v", i, m.Err)
				continue
			}
			c.res.moves++
			// The gap: the time on no worker, from the old connection's
			// last agent audio (or the move message, if later) to the new
			// connection up. A worker moves a call only at a clean point,
			// so the agent had finished its answer; the browsers asked a
			// question before each drain, so that most had just heard one.
			last := lastLevelBefore(levels, j, m.At)
			t.Logf("browser %d move %d: %v after the agent's last audio; after the move message: offer ready %v, answered %v, connected %v; gap %v",
				i, j+1, m.At.Sub(last).Round(time.Millisecond), m.Gathered.Sub(m.At).Round(time.Millisecond), m.Answered.Sub(m.At).Round(time.Millisecond),
				m.Connected.Sub(m.At).Round(time.Millisecond), m.Gap.Round(time.Millisecond))
			if m.Gap <= 0 {
				t.Errorf("browser %d: move %d has no gap measured", i, j+1)
				continue
			}
			c.res.gaps = append(c.res.gaps, m.Gap)
		}
		// Still in the conversation, on whichever worker it is now.
		seq := lastSeq(cl)
		if err := cl.SendText("Thanks, that's all."); err != nil {
			t.Errorf("browser %d: %v", i, err)
			continue
		}
		if _, err := cl.WaitEvent(ctx, func(e events.Event) bool { return e.Kind == events.PlayoutDone && e.Seq > seq }); err != nil {
			lost++
			t.Errorf("browser %d got no answer after the restarts: %v", i, err)
		}
		k := countBooked(cl.Events())
		c.res.browserBookings += k
		if k != 1 {
			t.Errorf("browser %d: %d bookings; want 1", i, k)
		}
	}
	c.res.browsers += len(clients)
	c.res.browsersLost += lost
	gaps := slices.Sorted(slices.Values(c.res.gaps))
	t.Logf("browsers: %d sessions, %d moves, %d lost; move gap p50 %v, p95 %v, max %v",
		len(clients), c.res.moves, lost, quantile(gaps, 0.5), quantile(gaps, 0.95), quantile(gaps, 1))
	if lost != 0 {
		t.Errorf("%d browser sessions lost", lost)
	}
	if len(gaps) == 0 {
		t.Errorf("no browser moved: no gap measured")
	}
	if q := quantile(gaps, 0.95); q > time.Second {
		t.Errorf("move gap p95 %v; want at most a second", q)
	}
}

// offerWithStaleCookie posts a new offer through HAProxy right after
// worker i was signalled, carrying the affinity cookie that names it (as
// a browser that was there before): HAProxy still has the worker in
// rotation until its check fails twice, gets its 503, and must send the
// offer to another worker.
func (c *cluster) offerWithStaleCookie(ctx context.Context, t *testing.T, i int) {
	jar, _ := cookiejar.New(nil)
	u, _ := url.Parse(c.front)
	jar.SetCookies(u, []*http.Cookie{{Name: "holdline_worker", Value: c.workers[i].name}})
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	sent := time.Now()
	cl, err := rtctest.Dial(dctx, c.front, rtctest.Options{Token: apiToken, Interfaces: []string{"eth0"}, HTTPClient: &http.Client{Jar: jar}})
	c.res.staleOffers++
	if err != nil {
		c.res.staleFailed++
		t.Errorf("an offer with %s's cookie, just after its SIGTERM: %v", c.workers[i].name, err)
		return
	}
	t.Logf("an offer with %s's cookie, sent just after its SIGTERM: connected in %v", c.workers[i].name, time.Since(sent).Round(time.Millisecond))
	if err := cl.Delete(dctx, c.front, apiToken); err != nil {
		t.Errorf("ending the offer's session: %v", err)
	}
	cl.Close()
}

// askBeforeDrain has every browser on worker i ask what it booked (a
// two-sentence answer, no tool call) and waits until each answer has
// started playing; it returns how many asked.
func (c *cluster) askBeforeDrain(ctx context.Context, t *testing.T, clients []*rtctest.Client, i int) int {
	held := c.list(i)
	seqs := map[int]uint64{}
	for j, cl := range clients {
		loc, _ := cl.Session()
		if !slices.ContainsFunc(held, func(s listed) bool { return strings.HasSuffix(loc, "/"+s.ID) }) {
			continue
		}
		seqs[j] = lastSeq(cl)
		if err := cl.SendText("What is my booking?"); err != nil {
			t.Errorf("browser %d: %v", j, err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for j, seq := range seqs {
		if _, err := clients[j].WaitEvent(wctx, func(e events.Event) bool { return e.Kind == events.PlayoutStarted && e.Seq > seq }); err != nil {
			t.Errorf("browser %d: its answer did not start: %v", j, err)
		}
	}
	return len(seqs)
}

// redispatched counts the requests HAProxy's log shows it sent again to
// another server (its retries field, "+N").
func redispatched(dir string) int {
	b, _ := os.ReadFile(filepath.Join(dir, "haproxy.log"))
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		for _, f := range strings.Fields(line) {
			if strings.Count(f, "/") == 4 && strings.Contains(f, "/+") {
				n++
				break
			}
		}
	}
	return n
}

// lastLevelBefore is when the last agent packet on connection conn
// arrived before at.
func lastLevelBefore(levels []rtctest.Level, conn int, at time.Time) time.Time {
	var last time.Time
	for _, lv := range levels {
		if lv.Conn == conn && !lv.At.After(at) {
			last = lv.At
		}
	}
	return last
}

// killOne kills the worker holding the most calls with SIGKILL: its
// browsers re-offer with their resume tokens and its phones dial again,
// both through the front doors, and pick their conversations up.
func (c *cluster) killOne(t *testing.T, sz size, pcap string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	clients := c.dialBrowsers(ctx, t, 3)
	for _, cl := range clients {
		c.res.browserBookings += countBooked(cl.Events())
	}
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	users := make([]string, sz.killCalls)
	for i := range users {
		users[i] = fmt.Sprintf("redial%d", i)
	}
	// Long calls: cut by the kill, not by their end.
	first := c.startSipp(t, "kill", len(users), 2, 2*time.Minute, pcap, users)
	time.Sleep(time.Duration(len(users))*time.Second/2 + 12*time.Second) // all up, each past its booking
	victim, most := 0, -1
	for i := range c.workers {
		if n := c.sessions(i); n > most {
			victim, most = i, n
		}
	}
	w := c.workers[victim]
	held := c.list(victim)
	heldPhones := 0
	for _, s := range held {
		if s.Transport == "sip" {
			heldPhones++
		}
	}
	picked0 := countLog(c, "call picks up its conversation")
	_ = w.proc.Signal(syscall.SIGKILL)
	<-w.proc.Done()
	killed := time.Now()
	t.Logf("%s killed with SIGKILL holding %d calls (%d phones)", w.name, most, heldPhones)
	// The browsers it held reconnect with their tokens through HAProxy, as
	// the web client does when its connection drops.
	resumed, onVictim := 0, 0
	for i, cl := range clients {
		loc, tok := cl.Session()
		if !slices.ContainsFunc(held, func(s listed) bool { return strings.HasSuffix(loc, "/"+s.ID) }) {
			continue
		}
		onVictim++
		cl.Close()
		r, err := rtctest.Dial(ctx, c.front, rtctest.Options{Token: apiToken, ResumeToken: tok, Interfaces: []string{"eth0"}})
		if err != nil {
			t.Errorf("browser %d could not resume: %v", i, err)
			continue
		}
		defer r.Close()
		if !r.Resumed {
			t.Errorf("browser %d: the front door started a new session", i)
		}
		resumed++
		if _, err := r.WaitEvent(ctx, func(e events.Event) bool { return e.Kind == events.PlayoutDone }); err != nil {
			t.Errorf("browser %d: the agent did not speak after the resume: %v", i, err)
		}
		if k := countBooked(r.Events()); k != 0 {
			t.Errorf("browser %d: the booking was made again on resume", i)
		}
	}
	c.res.killBrowsers, c.res.killResumed = onVictim, resumed
	c.res.browsers += len(clients)
	c.res.browsersLost += onVictim - resumed
	if resumed != onVictim {
		t.Errorf("%d of the %d browsers on the killed worker resumed", resumed, onVictim)
	}
	// The phones hang up and dial again from the same lines.
	first.stop()
	again := c.startSipp(t, "redial", len(users), 4, 8*time.Second, "", users)
	res := again.wait(t, 2*time.Minute)
	c.res.phones.add(res)
	picked := countLog(c, "call picks up its conversation") - picked0
	c.res.killHeld, c.res.killPicked = heldPhones, picked
	c.restart(t, victim)
	t.Logf("after the kill: %d of %d browsers resumed on other workers; %d phones dialled again, %d answered, %d of the %d cut off picked up their conversation; %v from the kill",
		resumed, onVictim, len(users), res.ok, picked, heldPhones, time.Since(killed).Round(time.Millisecond))
	if res.failed != 0 {
		t.Errorf("%d redials failed\n%s", res.failed, res.out)
	}
	if picked != heldPhones {
		t.Errorf("%d of the %d phones cut off picked their conversation up on redial", picked, heldPhones)
	}
}

// hangOne stops a worker with SIGSTOP: Kamailio's probe takes it out of
// rotation, HAProxy's check too, and new calls go to the others.
func (c *cluster) hangOne(t *testing.T) {
	w := c.workers[0]
	_ = w.proc.Signal(syscall.SIGSTOP)
	stopped := time.Now()
	// Both front doors at once: HAProxy's check (every 500 ms, fall 2)
	// and Kamailio's probe (every second; a probe unanswered for fr_timer
	// marks the worker inactive).
	for deadline := stopped.Add(15 * time.Second); c.res.hungOutHAProxy == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if up, _ := c.haproxyUp(); up == 2 {
			c.res.hungOutHAProxy = time.Since(stopped)
		}
	}
	out := c.waitDispatcher(2, 15*time.Second)
	took := time.Since(stopped)
	c.res.hungOut = took
	if c.res.hungOutHAProxy == 0 {
		t.Errorf("HAProxy kept %s in rotation 15 s after SIGSTOP", w.name)
	}
	t.Logf("%s hung with SIGSTOP: out of HAProxy's rotation after %v", w.name, c.res.hungOutHAProxy.Round(time.Millisecond))
	t.Logf("%s hung with SIGSTOP: out of Kamailio's rotation after %v", w.name, took.Round(time.Millisecond))
	if !strings.Contains(out, "URI: sip:"+w.node.Addr.String()) {
		t.Errorf("the dispatcher list does not name %s:\n%s", w.name, out)
	}
	// New calls go to the others, through both front doors.
	res := c.startSipp(t, "hung", 4, 4, 3*time.Second, "", nil).wait(t, time.Minute)
	c.res.phones.add(res)
	if res.failed != 0 {
		t.Errorf("%d calls failed while %s hung\n%s", res.failed, w.name, res.out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.res.browsers += 3
	for i := range 3 {
		cl, err := rtctest.Dial(ctx, c.front, rtctest.Options{Token: apiToken, Interfaces: []string{"eth0"}})
		if err != nil {
			c.res.browsersLost++
			t.Errorf("browser %d while %s hung: %v", i, w.name, err)
			continue
		}
		cl.Close()
	}
	_ = w.proc.Signal(syscall.SIGCONT)
	back := time.Now()
	c.waitDispatcher(3, 15*time.Second)
	c.res.hungBack = time.Since(back)
	c.waitHAProxy(3, 15*time.Second)
	t.Logf("%s woken with SIGCONT: back in rotation after %v", w.name, time.Since(back).Round(time.Millisecond))
}

// ---------------------------------------------------------------- the processes

func (c *cluster) startEdge() {
	t := c.t
	edge := c.edge.Addr.String()
	redis := c.edge.Command("redis-server", "redis/redis.conf", "--bind", edge, "--dir", c.dir, "--daemonize", "no", "--logfile", "", "--requirepass", redisPassword)
	c.startLogged(c.edge, redis, "redis")
	list := ""
	for _, name := range []string{"w1", "w2", "w3"} {
		list += fmt.Sprintf("1 sip:%s:%d 0 0\n", c.n.Node(name).Addr, sipPort)
	}
	dlist := filepath.Join(c.dir, "dispatcher.list")
	if err := os.WriteFile(dlist, []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	c.ctl = filepath.Join(c.dir, "kamailio.ctl")
	kam := c.edge.Command("kamailio", "-DD", "-E", "-f", "kamailio/kamailio.cfg", "-Y", c.dir, "-w", c.dir, "-m", "64", "-M", "8")
	kam.Env = append(os.Environ(), "HOLDLINE_SIP_LISTEN=udp:"+c.proxy, "HOLDLINE_DISPATCHER_LIST="+dlist, "HOLDLINE_KAMAILIO_CTL=unix:"+c.ctl)
	c.startLogged(c.edge, kam, "kamailio")
	// The shipped file, and a stats socket for the test to read the
	// servers' state from (a second file adds to the global section).
	c.haSock = filepath.Join(c.dir, "haproxy.sock")
	extra := filepath.Join(c.dir, "haproxy-test.cfg")
	if err := os.WriteFile(extra, []byte("global\n\tstats socket "+c.haSock+" level admin\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ha := c.edge.Command("haproxy", "-db", "-f", "haproxy/haproxy.cfg", "-f", extra)
	ha.Env = append(os.Environ(), fmt.Sprintf("HOLDLINE_HTTP_FRONT=%s:%d", edge, httpPort))
	for _, name := range []string{"w1", "w2", "w3"} {
		ha.Env = append(ha.Env, fmt.Sprintf("HOLDLINE_WORKER_%s=%s:%d", name[1:], c.n.Node(name).Addr, httpPort))
	}
	c.startLogged(c.edge, ha, "haproxy")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, err := exec.Command("redis-cli", "-h", edge, "--no-auth-warning", "-a", redisPassword, "ping").CombinedOutput()
		if err == nil && strings.TrimSpace(string(out)) == "PONG" {
			break
		}
		if time.Now().After(deadline) {
			routes, _ := exec.Command("ip", "addr").CombinedOutput()
			t.Fatalf("redis-server on the edge does not answer: %v %s\n%s", err, out, routes)
		}
	}
}

func (c *cluster) startLogged(nd *netnstest.Node, cmd *exec.Cmd, name string) *netnstest.Proc {
	f, err := os.Create(filepath.Join(c.dir, name+".log"))
	if err != nil {
		c.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	p, err := nd.Start(cmd)
	if err != nil {
		c.t.Fatalf("%s: %v", name, err)
	}
	go func() { <-p.Done(); f.Close() }()
	return p
}

func (c *cluster) startWorker(i int) {
	w := c.workers[i]
	w.start++
	w.log = filepath.Join(c.dir, fmt.Sprintf("%s-%d.log", w.name, w.start))
	addr := w.node.Addr.String()
	cmd := w.node.Command(c.bin, "serve", "--agent", "booking", "--worker", w.name,
		"--http", fmt.Sprintf("%s:%d", addr, httpPort), "--sip", fmt.Sprintf("udp:%s:%d", addr, sipPort),
		"--store", fmt.Sprintf("redis://:%s@%s:6379", redisPassword, c.edge.Addr), "--sip-front-door", "sip:holdline@"+c.proxy,
		"--booking-time", "1500ms", "--bookings", c.bookings, "--resume-ttl", "30s", "--drain-timeout", "2m")
	cmd.Env = append(os.Environ(), "HOLDLINE_TOKEN="+apiToken, "HOLDLINE_ADMIN_TOKEN="+adminToken,
		"HOLDLINE_SNAPSHOT_KEY="+snapshotKey, "OPENAI_API_KEY=")
	w.proc = c.startLogged(w.node, cmd, fmt.Sprintf("%s-%d", w.name, w.start))
}

func (c *cluster) waitReady(i int) {
	w := c.workers[i]
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if status(w.url+"/readyz") == http.StatusOK {
			return
		}
		select {
		case <-w.proc.Done():
			log, _ := os.ReadFile(w.log)
			c.t.Fatalf("%s exited at start:\n%s", w.name, log)
		default:
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s not ready in 90 s", w.name)
		}
	}
}

// restart starts worker i again and waits until both front doors send
// it calls.
func (c *cluster) restart(t *testing.T, i int) {
	c.startWorker(i)
	c.waitReady(i)
	c.waitDispatcher(3, 15*time.Second)
	c.waitHAProxy(3, 15*time.Second)
}

// haproxyUp is how many of the workers HAProxy has UP, from its stats
// socket's "show stat".
func (c *cluster) haproxyUp() (int, string) {
	conn, err := net.DialTimeout("unix", c.haSock, time.Second)
	if err != nil {
		return -1, err.Error()
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("show stat\n")); err != nil {
		return -1, err.Error()
	}
	b, _ := io.ReadAll(conn)
	lines := strings.Split(string(b), "\n")
	if len(lines) == 0 {
		return -1, string(b)
	}
	head := strings.Split(strings.TrimPrefix(lines[0], "# "), ",")
	col := slices.Index(head, "status")
	if col < 0 {
		return -1, string(b)
	}
	up := 0
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		if len(f) > col && f[0] == "holdline_workers" && strings.HasPrefix(f[1], "w") && strings.HasPrefix(f[col], "UP") {
			up++
		}
	}
	return up, string(b)
}

// waitHAProxy waits until HAProxy has n workers UP.
func (c *cluster) waitHAProxy(n int, within time.Duration) {
	for deadline := time.Now().Add(within); ; time.Sleep(50 * time.Millisecond) {
		up, out := c.haproxyUp()
		if up == n {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("HAProxy did not reach %d workers up in %v:\n%s", n, within, out)
		}
	}
}

// drainAndRestart sends worker i SIGTERM, waits for it to exit, and
// starts it again; it returns how long the drain took and the exit code.
func (c *cluster) drainAndRestart(t *testing.T, i int, signalled func()) (time.Duration, int) {
	w := c.workers[i]
	start := time.Now()
	_ = w.proc.Signal(syscall.SIGTERM)
	if signalled != nil {
		signalled()
	}
	select {
	case <-w.proc.Done():
	case <-time.After(3 * time.Minute):
		t.Fatalf("%s did not exit after its drain", w.name)
	}
	took := time.Since(start)
	code := w.proc.ExitCode()
	c.restart(t, i)
	return took, code
}

// waitDispatcher waits until Kamailio's dispatcher has n workers active,
// and returns its list.
func (c *cluster) waitDispatcher(n int, within time.Duration) string {
	var out []byte
	for deadline := time.Now().Add(within); ; time.Sleep(100 * time.Millisecond) {
		var err error
		out, err = c.edge.Command("kamcmd", "-s", "unix:"+c.ctl, "dispatcher.list").CombinedOutput()
		if err == nil && strings.Count(string(out), "FLAGS: AP") == n {
			return string(out)
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("Kamailio's dispatcher did not reach %d active workers in %v:\n%s", n, within, out)
		}
	}
}

// sessions is worker i's holdline_worker_sessions, -1 when it cannot say.
func (c *cluster) sessions(i int) int {
	w := c.workers[i]
	req, _ := http.NewRequest(http.MethodGet, w.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	cl := http.Client{Timeout: time.Second}
	res, err := cl.Do(req)
	if err != nil {
		return -1
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "holdline_worker_sessions{") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			return int(v)
		}
	}
	return -1
}

// listed is a call as GET /v1/sessions lists it.
type listed struct {
	ID        string `json:"id"`
	Transport string `json:"transport"`
}

// list is worker i's calls.
func (c *cluster) list(i int) []listed {
	req, _ := http.NewRequest(http.MethodGet, c.workers[i].url+"/v1/sessions", nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	cl := http.Client{Timeout: 2 * time.Second}
	res, err := cl.Do(req)
	if err != nil {
		c.t.Errorf("listing %s's calls: %v", c.workers[i].name, err)
		return nil
	}
	defer res.Body.Close()
	var out struct{ Sessions []listed }
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		c.t.Errorf("listing %s's calls: %v", c.workers[i].name, err)
	}
	return out.Sessions
}

// sample notes every worker's calls each second until stopped.
func (c *cluster) sample(began time.Time) (stop func()) {
	done := make(chan struct{})
	var once sync.Once
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				s := sample{at: time.Since(began).Round(time.Second)}
				for i := range c.workers {
					s.calls[i] = c.sessions(i)
				}
				c.mu.Lock()
				c.samples = append(c.samples, s)
				c.mu.Unlock()
			}
		}
	}()
	return func() { once.Do(func() { close(done) }) }
}

func (c *cluster) reportSamples(t *testing.T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	b.WriteString("calls per worker over time (-1: not answering)\n  time   w1  w2  w3\n")
	for i, s := range c.samples {
		if i%5 != 0 && i != len(c.samples)-1 {
			continue
		}
		fmt.Fprintf(&b, "  %4.0fs %3d %3d %3d\n", s.at.Seconds(), s.calls[0], s.calls[1], s.calls[2])
	}
	t.Log(b.String())
}

// dialBrowsers connects n browsers through HAProxy, each of which asks
// for a table by text and waits for the booking.
func (c *cluster) dialBrowsers(ctx context.Context, t *testing.T, n int) []*rtctest.Client {
	var out []*rtctest.Client
	for i := range n {
		// A cookie jar, as a browser has: HAProxy's affinity cookie names
		// the worker, and a re-offer after a move still carries the old
		// one, which the front door must not follow to a draining worker.
		jar, _ := cookiejar.New(nil)
		cl, err := rtctest.Dial(ctx, c.front, rtctest.Options{Token: apiToken, Interfaces: []string{"eth0"}, HTTPClient: &http.Client{Jar: jar}})
		if err != nil {
			t.Fatalf("browser %d: %v", i, err)
		}
		out = append(out, cl)
		if err := cl.SendText("Book a table for two at seven."); err != nil {
			t.Fatal(err)
		}
	}
	for i, cl := range out {
		if _, err := cl.WaitEvent(ctx, func(e events.Event) bool { return e.Kind == events.ToolTerminal && e.Tool == "book_table" }); err != nil {
			t.Fatalf("browser %d: no booking: %v", i, err)
		}
	}
	return out
}

// ---------------------------------------------------------------- phones

type phone struct {
	proc *netnstest.Proc
	out  *syncBuffer
}

// startBaresips calls the proxy from n baresip softphones, which list
// REFER in their INVITEs' Allow: a draining worker moves them. Each asks
// for a table after the greeting and stays on the line.
func (c *cluster) startBaresips(t *testing.T, n int) []*phone {
	var out []*phone
	callers := c.n.Node("callers")
	for i := range n {
		home, _ := baresiptest.HomeOn(t, callers.Addr.String(), fmt.Sprintf("softphone%d", i), "Book a table for two at seven.", 6, 240)
		cmd := callers.Command("baresip", "-f", home, "-e", "/dial sip:holdline@"+c.proxy, "-t", "300")
		ph := &phone{out: &syncBuffer{}}
		cmd.Stdout, cmd.Stderr = ph.out, ph.out
		p, err := callers.Start(cmd)
		if err != nil {
			t.Fatal(err)
		}
		ph.proc = p
		out = append(out, ph)
	}
	return out
}

// syncBuffer is a bytes.Buffer written by a process and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type sippRun struct {
	cmd  *exec.Cmd
	proc *netnstest.Proc
	out  *bytes.Buffer
	stat string
}

type sippResult struct {
	total, ok, failed int
	out               string
}

var sippPort = struct {
	sync.Mutex
	next int
}{next: 6000}

// startSipp places n calls through Kamailio from the callers' namespace,
// rate a second, each speaking pcap (none: silence) after the greeting and
// staying hold longer; users, if given, are the calls' From users in turn
// (the caller's line).
func (c *cluster) startSipp(t *testing.T, name string, n, rate int, hold time.Duration, pcap string, users []string) *sippRun {
	dir := filepath.Join(c.dir, "sipp-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	play := ""
	if pcap != "" {
		play = fmt.Sprintf(`<nop><action><exec play_pcap_audio="%s"/></action></nop>`, pcap)
	}
	from := "caller[call_number]"
	args := []string{}
	if len(users) > 0 {
		from = "[field0]"
		csv := "SEQUENTIAL\n" + strings.Join(users, "\n") + "\n"
		if err := os.WriteFile(filepath.Join(dir, "users.csv"), []byte(csv), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-inf", filepath.Join(dir, "users.csv"))
	}
	scen := fmt.Sprintf(clusterScenario, from, play, hold.Milliseconds())
	sf := filepath.Join(dir, "scenario.xml")
	if err := os.WriteFile(sf, []byte(scen), 0o644); err != nil {
		t.Fatal(err)
	}
	sippPort.Lock()
	port := sippPort.next
	sippPort.next += 10
	sippPort.Unlock()
	me := c.n.Node("callers").Addr.String()
	args = append(args, "-sf", sf, "-i", me, "-p", fmt.Sprint(port), "-mi", me, "-mp", fmt.Sprint(port+2),
		"-nostdin", "-m", fmt.Sprint(n), "-l", fmt.Sprint(n), "-r", fmt.Sprint(rate),
		"-timeout", fmt.Sprint(int((hold+2*time.Minute).Seconds()))+"s", "-timeout_error", "-trace_stat", "-stf", filepath.Join(dir, "stat.csv"),
		"-trace_err", "-error_file", filepath.Join(dir, "errors.log"), c.proxy)
	cmd := c.n.Node("callers").Command("sipp", args...)
	cmd.Dir = dir
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	p, err := c.n.Node("callers").Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return &sippRun{cmd: cmd, proc: p, out: out, stat: filepath.Join(dir, "stat.csv")}
}

// stop ends a sipp run at once: its phones hang up on nobody (their
// worker is gone).
func (r *sippRun) stop() {
	_ = r.proc.Signal(syscall.SIGKILL)
	<-r.proc.Done()
}

func (r *sippRun) wait(t *testing.T, within time.Duration) sippResult {
	select {
	case <-r.proc.Done():
	case <-time.After(within):
		_ = r.proc.Signal(syscall.SIGKILL)
		<-r.proc.Done()
		t.Errorf("sipp did not finish in %v", within)
	}
	res := sippResult{out: r.out.String()}
	if b, err := os.ReadFile(r.stat); err == nil {
		res.total, res.ok, res.failed = sippCounts(string(b))
	}
	if errs, err := os.ReadFile(filepath.Join(filepath.Dir(r.stat), "errors.log")); err == nil && len(errs) > 0 {
		res.out += "\n" + string(errs)
	}
	return res
}

// sippCounts reads the last line of sipp's statistics file: calls
// placed, successful, failed.
func sippCounts(csv string) (total, ok, failed int) {
	lines := strings.Split(strings.TrimSpace(csv), "\n")
	if len(lines) < 2 {
		return 0, 0, 0
	}
	head := strings.Split(lines[0], ";")
	last := strings.Split(lines[len(lines)-1], ";")
	get := func(name string) int {
		for i, h := range head {
			if h == name && i < len(last) {
				v, _ := strconv.Atoi(last[i])
				return v
			}
		}
		return 0
	}
	return get("TotalCallCreated"), get("SuccessfulCall(C)"), get("FailedCall(C)")
}

// clusterScenario is a phone that calls through the proxy without REFER
// in its Allow (so a draining worker keeps the call to its end), listens
// to the greeting, says its request and stays a while; the in-dialog
// requests follow the proxy's Record-Route.
const clusterScenario = `<?xml version="1.0" encoding="ISO-8859-1" ?>
<scenario name="holdline cluster phone">
  <send retrans="500">
    <![CDATA[
      INVITE sip:holdline@[remote_ip]:[remote_port] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
      From: <sip:%[1]s@[local_ip]>;tag=[pid]T[call_number]
      To: <sip:holdline@[remote_ip]:[remote_port]>
      Call-ID: [call_id]
      CSeq: 1 INVITE
      Contact: <sip:caller@[local_ip]:[local_port]>
      Max-Forwards: 70
      Content-Type: application/sdp
      Content-Length: [len]

      v=0
      o=user1 53655765 2353687637 IN IP[local_ip_type] [local_ip]
      s=-
      c=IN IP[media_ip_type] [media_ip]
      t=0 0
      m=audio [media_port] RTP/AVP 0
      a=rtpmap:0 PCMU/8000
    ]]>
  </send>
  <recv response="100" optional="true"/>
  <recv response="180" optional="true"/>
  <recv response="183" optional="true"/>
  <recv response="200" rtd="true" rrs="true"/>
  <send>
    <![CDATA[
      ACK [next_url] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
      From: <sip:%[1]s@[local_ip]>;tag=[pid]T[call_number]
      To: <sip:holdline@[remote_ip]:[remote_port]>[peer_tag_param]
      Call-ID: [call_id]
      CSeq: 1 ACK
      [routes]
      Contact: <sip:caller@[local_ip]:[local_port]>
      Max-Forwards: 70
      Content-Length: 0
    ]]>
  </send>
  <pause milliseconds="5000"/>
  %[2]s
  <pause milliseconds="%[3]d"/>
  <send retrans="500">
    <![CDATA[
      BYE [next_url] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
      From: <sip:%[1]s@[local_ip]>;tag=[pid]T[call_number]
      To: <sip:holdline@[remote_ip]:[remote_port]>[peer_tag_param]
      Call-ID: [call_id]
      CSeq: 2 BYE
      [routes]
      Contact: <sip:caller@[local_ip]:[local_port]>
      Max-Forwards: 70
      Content-Length: 0
    ]]>
  </send>
  <recv response="200" crlf="true"/>
</scenario>
`

// speechPCAP writes text in espeak-ng's voice as a pcap of 20 ms PCMU RTP
// packets, which sipp plays into a call.
func speechPCAP(t *testing.T, dir, text string) string {
	t.Helper()
	raw, wav := filepath.Join(dir, "speech-raw.wav"), filepath.Join(dir, "speech.s16")
	for _, args := range [][]string{
		{"espeak-ng", "-v", "en-us+edward", "-p", "35", "-w", raw, text},
		{"sox", raw, "-r", "8000", "-c", "1", "-b", "16", "-e", "signed-integer", "-t", "raw", wav, "pad", "0.2", "0.6"},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", args[0], err, out)
		}
	}
	pcm, err := os.ReadFile(wav)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	le := binary.LittleEndian
	hdr := make([]byte, 24)
	le.PutUint32(hdr[0:], 0xa1b2c3d4)
	le.PutUint16(hdr[4:], 2)
	le.PutUint16(hdr[6:], 4)
	le.PutUint32(hdr[16:], 65535)
	le.PutUint32(hdr[20:], 1) // Ethernet
	b.Write(hdr)
	const frame = 160
	for i, seq := 0, 0; i+2*frame <= len(pcm); i, seq = i+2*frame, seq+1 {
		payload := g711.EncodeUlaw(pcm[i : i+2*frame])
		rtp := make([]byte, 12, 12+len(payload))
		rtp[0] = 0x80
		binary.BigEndian.PutUint16(rtp[2:], uint16(seq))
		binary.BigEndian.PutUint32(rtp[4:], uint32(seq*frame))
		binary.BigEndian.PutUint32(rtp[8:], 0x484c4e45)
		rtp = append(rtp, payload...)
		udp := make([]byte, 8)
		binary.BigEndian.PutUint16(udp[0:], 6000)
		binary.BigEndian.PutUint16(udp[2:], 6002)
		binary.BigEndian.PutUint16(udp[4:], uint16(8+len(rtp)))
		ip := []byte{0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2}
		binary.BigEndian.PutUint16(ip[2:], uint16(20+8+len(rtp)))
		eth := []byte{0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 1, 0x08, 0x00}
		pkt := slices.Concat(eth, ip, udp, rtp)
		rec := make([]byte, 16)
		at := time.Duration(seq) * 20 * time.Millisecond
		le.PutUint32(rec[0:], uint32(at/time.Second))
		le.PutUint32(rec[4:], uint32(at%time.Second/time.Microsecond))
		le.PutUint32(rec[8:], uint32(len(pkt)))
		le.PutUint32(rec[12:], uint32(len(pkt)))
		b.Write(rec)
		b.Write(pkt)
	}
	path := filepath.Join(dir, "speech.pcap")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// ---------------------------------------------------------------- tallies

func status(url string) int {
	cl := http.Client{Timeout: time.Second}
	res, err := cl.Get(url)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

func lastSeq(cl *rtctest.Client) uint64 {
	var s uint64
	for _, e := range cl.Events() {
		s = max(s, e.Seq)
	}
	return s
}

func countBooked(evs []events.Event) int {
	n := 0
	for _, e := range evs {
		if e.Kind == events.ToolTerminal && e.Tool == "book_table" {
			n++
		}
	}
	return n
}

// countLog counts lines holding text in every worker log so far.
func countLog(c *cluster, text string) int {
	logs, _ := filepath.Glob(filepath.Join(c.dir, "w*-*.log"))
	n := 0
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		n += strings.Count(string(b), text)
	}
	return n
}

// duplicateBookings reads the bookings every worker appended to: how many
// were made twice for the same call (the same idempotency key), and how
// many distinct ones there are.
func duplicateBookings(t *testing.T, path string) (dups, distinct int) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0, 0
	}
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var rec struct {
			Key string `json:"key"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("bookings file: %v", err)
		}
		if seen[rec.Key]++; seen[rec.Key] > 1 {
			dups++
		}
	}
	return dups, len(seen)
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, int(q*float64(len(d))))].Round(time.Millisecond)
}

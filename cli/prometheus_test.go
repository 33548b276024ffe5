package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/webrtc/rtctest"
)

// Debian's Prometheus scrapes a running holdline serve, as an operator
// would run it with deploy/prometheus: the turn breakdown's histogram
// arrives, and every rule of holdline-rules.yml loads and evaluates
// without error. promtool accepts the rules and the config, and every
// metric the rules and the Grafana dashboard name is one Holdline
// exports.
func TestPrometheusScrapesServeWithTheDeployRules(t *testing.T) {
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus is missing (make test installs Debian's prometheus)")
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is missing (make test installs Debian's prometheus)")
	}
	rules, _ := filepath.Abs("../deploy/prometheus/holdline-rules.yml")
	for _, args := range [][]string{{"check", "rules", rules}, {"check", "config", "../deploy/prometheus/prometheus.yml"}} {
		if out, err := exec.Command(promtool, args...).CombinedOutput(); err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	checkMetricNames(t)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	base := serveForBrowser(t, ctx)
	u, _ := url.Parse(base)

	// A turn, so that the breakdown has something to show.
	c, err := rtctest.Dial(ctx, base, rtctest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SendText("Book a table for two at seven"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitEvent(ctx, func(e events.Event) bool { return e.Kind == events.TurnMetrics }); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	cfg := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs:
  - job_name: holdline
    static_configs: [{targets: [%q]}]
`, rules, u.Host)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeLocalAddr(t)
	cmd := exec.Command(prom, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus:\n%s", log.String())
		}
	})

	api := func(path string, out any) bool {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(out) == nil
	}
	type rule struct {
		Name, Health, LastError string
	}
	// Every rule the file holds must load.
	text, err := os.ReadFile(rules)
	if err != nil {
		t.Fatal(err)
	}
	wantRules := len(regexp.MustCompile(`(?m)^\s*- (record|alert):`).FindAll(text, -1))
	var (
		series int
		bad    []string
		loaded int
	)
	for {
		var q struct {
			Data struct{ Result []json.RawMessage }
		}
		if api("/api/v1/query?query="+url.QueryEscape(`holdline_turn_stage_seconds_count{stage="first_token"}`), &q) {
			series = len(q.Data.Result)
		}
		var r struct {
			Data struct {
				Groups []struct{ Rules []rule }
			}
		}
		if api("/api/v1/rules", &r) {
			loaded, bad = 0, nil
			for _, g := range r.Data.Groups {
				for _, ru := range g.Rules {
					loaded++
					if ru.Health != "ok" {
						bad = append(bad, fmt.Sprintf("%s: %s %s", ru.Name, ru.Health, ru.LastError))
					}
				}
			}
		}
		if series > 0 && loaded == wantRules && len(bad) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("Prometheus has %d series of the first token's stage, %d rules loaded (want %d), not ok: %v", series, loaded, wantRules, bad)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// checkMetricNames checks that every metric the deploy files query is
// one Holdline exports (named in its source), so a renamed metric cannot
// leave a dashboard panel silently empty.
func checkMetricNames(t *testing.T) {
	t.Helper()
	var src strings.Builder
	for _, glob := range []string{"../calls/*.go", "../server/*.go"} {
		files, _ := filepath.Glob(glob)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			src.Write(b)
		}
	}
	name := regexp.MustCompile(`\bholdline_[a-z_]+`)
	suffix := regexp.MustCompile(`_(bucket|count|sum)$`)
	for _, f := range []string{"../deploy/prometheus/holdline-rules.yml", "../deploy/grafana/holdline-dashboard.json"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, ".json") && !json.Valid(b) {
			t.Fatalf("%s is not JSON", f)
		}
		for _, n := range name.FindAllString(string(b), -1) {
			n = suffix.ReplaceAllString(n, "")
			if !strings.Contains(src.String(), `"`+n+`"`) {
				t.Errorf("%s queries %s, which Holdline does not export", f, n)
			}
		}
	}
}

// freeLocalAddr is a free TCP address on 127.0.0.1.
func freeLocalAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

package server_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// importFrom finds the relative imports of a web client module.
var importFrom = regexp.MustCompile(`(?m)^\s*(?:import|export)\b[^;]*?\bfrom\s+'(\./[^']+|\.\./[^']+)'`)

// The web client is ES modules served as they are: every module the page
// reaches from app.js must be served, as JavaScript (a browser refuses to
// run a module served as anything else), and be the file in the tree.
func TestWebClientServesEveryModuleAsJavaScript(t *testing.T) {
	hs, _, _ := newServer(t)
	_, index := get(t, hs.URL+"/")
	if !strings.Contains(index, `<script type="module" src="app.js">`) {
		t.Fatal("GET / does not load app.js as a module")
	}
	seen := map[string]bool{}
	queue := []string{"app.js"}
	for len(queue) > 0 {
		path := queue[0]
		queue = queue[1:]
		if seen[path] {
			continue
		}
		seen[path] = true
		want, err := os.ReadFile(filepath.Join("web", filepath.FromSlash(path)))
		if err != nil {
			t.Errorf("%s is imported but not in web/: %v", path, err)
			continue
		}
		resp, body := get(t, hs.URL+"/"+path)
		if resp.StatusCode != 200 || body != string(want) {
			t.Errorf("GET /%s: %d, %d bytes; want the file's %d", path, resp.StatusCode, len(body), len(want))
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/javascript") {
			t.Errorf("GET /%s: Content-Type %q, want text/javascript", path, ct)
		}
		for _, m := range importFrom.FindAllStringSubmatch(string(want), -1) {
			queue = append(queue, filepath.ToSlash(filepath.Join(filepath.Dir(path), m[1])))
		}
	}
	// And no module is left out of the page.
	modules, err := filepath.Glob(filepath.Join("web", "client", "*.js"))
	if err != nil || len(modules) == 0 {
		t.Fatalf("no modules in web/client: %v", err)
	}
	for _, m := range modules {
		if rel := "client/" + filepath.Base(m); !seen[rel] {
			t.Errorf("%s is not imported from app.js", rel)
		}
	}
}

// The web client's logic that needs no browser has Node unit tests
// (server/webtest/*.test.mjs, Node's own runner, no packages).
func TestWebClientUnitTests(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH: the web client's unit tests (server/webtest) need Node 20 or later")
	}
	files, err := filepath.Glob(filepath.Join("webtest", "*.test.mjs"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no unit tests in webtest/: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"--test"}, files...)...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("node --test %s: %v\n%s", strings.Join(files, " "), err, out.String())
	}
}

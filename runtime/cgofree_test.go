package runtime_test

import (
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"testing"
)

// TestAgentPackagesBuildWithoutCgo checks that the packages an agent
// imports build with CGO_ENABLED=0, so that an agent's package and its unit
// tests need no C library: the C libraries belong to the transports and
// engines (sip, webrtc, stt/pocketsphinx, media/aec), which the agent
// reaches through interfaces (runtime.Transfer, not sip.Transfer).
func TestAgentPackagesBuildWithoutCgo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds packages")
	}
	goBin := filepath.Join(goruntime.GOROOT(), "bin", "go")
	cmd := exec.Command(goBin, "build", "-o", os.DevNull,
		"github.com/holdline/holdline/runtime", "github.com/holdline/holdline/tools", "github.com/holdline/holdline/llm",
		"github.com/holdline/holdline/events", "github.com/holdline/holdline/sim", "github.com/holdline/holdline/sim/simtest",
		"github.com/holdline/holdline/scripted", "github.com/holdline/holdline/examples/pizza")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build: %v\n%s", err, out)
	}
}
